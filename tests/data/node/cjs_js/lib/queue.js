class Queue {
  constructor() {
    this.items = [];
  }

  enqueue(item) {
    this.items.push(item);
    return this.items.length;
  }

  dequeue() {
    if (this.items.length === 0) {
      throw new Error("the queue is empty");
    }
    return this.items.shift();
  }
}

module.exports = { Queue };
