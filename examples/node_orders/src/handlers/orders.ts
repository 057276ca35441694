/** Express-style route handlers for orders: plain functions over request and response. */

import { Line, OrderBook, OrderError, Status, orderTotal } from "../orders";

export interface Request {
  params: Record<string, string>;
  query: Record<string, string | undefined>;
  body: unknown;
}

export interface Response {
  status(code: number): Response;
  json(body: unknown): void;
}

export type Handler = (req: Request, res: Response) => void;

const STATUSES: Status[] = ["open", "paid", "shipped", "cancelled"];

function orderId(req: Request): number {
  const id = Number(req.params.id);
  if (!Number.isInteger(id) || id < 1) {
    throw new OrderError(`bad order id: ${req.params.id}`);
  }
  return id;
}

function fail(res: Response, error: unknown): void {
  if (error instanceof OrderError) {
    const missing = error.message.endsWith("not found");
    res.status(missing ? 404 : 422).json({ error: error.message });
    return;
  }
  throw error;
}

function isLines(value: unknown): value is Line[] {
  return (
    Array.isArray(value) &&
    value.every(
      (l) =>
        typeof l === "object" &&
        l !== null &&
        typeof l.sku === "string" &&
        typeof l.quantity === "number" &&
        typeof l.unitCents === "number",
    )
  );
}

export function orderHandlers(book: OrderBook): Record<string, Handler> {
  return {
    list(req, res) {
      const status = req.query.status;
      if (status !== undefined && !STATUSES.includes(status as Status)) {
        res.status(400).json({ error: `unknown status: ${status}` });
        return;
      }
      res.status(200).json(book.list(status as Status | undefined));
    },
    show(req, res) {
      try {
        const order = book.get(orderId(req));
        res.status(200).json({ ...order, totalCents: orderTotal(order) });
      } catch (error) {
        fail(res, error);
      }
    },
    create(req, res) {
      const body = (req.body ?? {}) as { customer?: unknown; lines?: unknown };
      if (typeof body.customer !== "string" || !isLines(body.lines)) {
        res.status(400).json({ error: "customer (string) and lines (array) are required" });
        return;
      }
      try {
        res.status(201).json(book.create(body.customer, body.lines));
      } catch (error) {
        fail(res, error);
      }
    },
    pay(req, res) {
      try {
        res.status(200).json(book.move(orderId(req), "paid"));
      } catch (error) {
        fail(res, error);
      }
    },
  };
}
