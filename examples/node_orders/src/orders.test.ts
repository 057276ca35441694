import { OrderBook, OrderError, orderTotal } from "./orders";

const lamp = { sku: "lamp", quantity: 2, unitCents: 1500 };

describe("OrderBook", () => {
  let book: OrderBook;

  beforeEach(() => {
    book = new OrderBook();
  });

  it("creates open orders with increasing ids", () => {
    const first = book.create("ada", [lamp]);
    const second = book.create("bob", [lamp]);
    expect(first).toEqual({ id: 1, customer: "ada", lines: [lamp], status: "open" });
    expect(second.id).toBe(2);
  });

  it("refuses an order without lines", () => {
    expect(() => book.create("ada", [])).toThrow(
      new OrderError("an order needs at least one line"),
    );
  });

  it("moves an order from open to paid", () => {
    const order = book.create("ada", [lamp]);
    expect(book.move(order.id, "paid").status).toBe("paid");
    expect(book.list("paid")).toEqual([order]);
  });

  it("refuses to ship an open order", () => {
    const order = book.create("ada", [lamp]);
    expect(() => book.move(order.id, "shipped")).toThrow(
      `order ${order.id}: cannot go from open to shipped`,
    );
  });
});

describe("orderTotal", () => {
  it("sums quantity times unit price", () => {
    const order = { id: 1, customer: "ada", status: "open" as const, lines: [lamp, lamp] };
    expect(orderTotal(order)).toBe(6000);
  });
});
