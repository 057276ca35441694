import request from "supertest";

import { OrderBook } from "../orders";
import { createServer } from "../server";

describe("order routes", () => {
  let book: OrderBook;
  let app: ReturnType<typeof createServer>;

  beforeEach(() => {
    book = new OrderBook();
    app = createServer(book);
  });

  it("POST /orders creates an order", async () => {
    const res = await request(app)
      .post("/orders")
      .send({ customer: "ada", lines: [{ sku: "lamp", quantity: 1, unitCents: 1500 }] });
    expect(res.status).toBe(201);
    expect(res.body).toEqual({
      id: 1,
      customer: "ada",
      lines: [{ sku: "lamp", quantity: 1, unitCents: 1500 }],
      status: "open",
    });
  });

  it("POST /orders without lines is a 400 with the reason", async () => {
    const res = await request(app).post("/orders").send({ customer: "ada" });
    expect(res.status).toBe(400);
    expect(res.body).toEqual({ error: "customer (string) and lines (array) are required" });
  });

  it("GET /orders/:id shows the total", async () => {
    book.create("ada", [{ sku: "lamp", quantity: 2, unitCents: 1500 }]);
    const res = await request(app).get("/orders/1");
    expect(res.status).toBe(200);
    expect(res.body.totalCents).toBe(3000);
  });

  it("GET /orders/:id of a missing order is a 404", async () => {
    const res = await request(app).get("/orders/9");
    expect(res.status).toBe(404);
    expect(res.body).toEqual({ error: "order 9 not found" });
  });
});
