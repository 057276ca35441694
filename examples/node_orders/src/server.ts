/** A tiny router that serves the order handlers over node:http (no framework needed). */

import http from "node:http";

import { Handler, Request, Response, orderHandlers } from "./handlers/orders";
import { OrderBook } from "./orders";

interface Route {
  method: string;
  pattern: RegExp;
  handler: Handler;
}

function routes(book: OrderBook): Route[] {
  const h = orderHandlers(book);
  return [
    { method: "GET", pattern: /^\/orders$/, handler: h.list },
    { method: "POST", pattern: /^\/orders$/, handler: h.create },
    { method: "GET", pattern: /^\/orders\/(?<id>[^/]+)$/, handler: h.show },
    { method: "POST", pattern: /^\/orders\/(?<id>[^/]+)\/pay$/, handler: h.pay },
  ];
}

function respond(raw: http.ServerResponse): Response {
  const res: Response = {
    status(code) {
      raw.statusCode = code;
      return res;
    },
    json(body) {
      raw.setHeader("content-type", "application/json");
      raw.end(JSON.stringify(body));
    },
  };
  return res;
}

async function readBody(raw: http.IncomingMessage): Promise<unknown> {
  const chunks: Buffer[] = [];
  for await (const chunk of raw) {
    chunks.push(chunk as Buffer);
  }
  const text = Buffer.concat(chunks).toString("utf8");
  return text ? JSON.parse(text) : undefined;
}

export function createServer(book: OrderBook = new OrderBook()): http.Server {
  const table = routes(book);
  return http.createServer(async (raw, out) => {
    const url = new URL(raw.url ?? "/", "http://localhost");
    const res = respond(out);
    const route = table.find((r) => r.method === raw.method && r.pattern.test(url.pathname));
    if (route === undefined) {
      res.status(404).json({ error: `no route for ${raw.method} ${url.pathname}` });
      return;
    }
    let body: unknown;
    try {
      body = await readBody(raw);
    } catch {
      res.status(400).json({ error: "body is not JSON" });
      return;
    }
    const req: Request = {
      params: { ...(url.pathname.match(route.pattern)?.groups ?? {}) },
      query: Object.fromEntries(url.searchParams),
      body,
    };
    route.handler(req, res);
  });
}
