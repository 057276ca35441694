const { Queue } = require("../lib/queue");

describe("Queue", () => {
  it("is first in, first out", () => {
    const queue = new Queue();
    queue.enqueue("a");
    queue.enqueue("b");
    expect(queue.dequeue()).toBe("a");
  });

  it.todo("refuses to dequeue when empty");
});
