/** Orders: lines, totals and the status workflow, kept in memory by an OrderBook. */

export type Status = "open" | "paid" | "shipped" | "cancelled";

export interface Line {
  sku: string;
  quantity: number;
  unitCents: number;
}

export interface Order {
  id: number;
  customer: string;
  lines: Line[];
  status: Status;
}

export class OrderError extends Error {}

const TRANSITIONS: Record<Status, Status[]> = {
  open: ["paid", "cancelled"],
  paid: ["shipped", "cancelled"],
  shipped: [],
  cancelled: [],
};

export function orderTotal(order: Order): number {
  return order.lines.reduce((sum, line) => sum + line.quantity * line.unitCents, 0);
}

export class OrderBook {
  private orders = new Map<number, Order>();
  private nextId = 1;

  create(customer: string, lines: Line[]): Order {
    if (!customer.trim()) {
      throw new OrderError("customer is required");
    }
    if (lines.length === 0) {
      throw new OrderError("an order needs at least one line");
    }
    for (const line of lines) {
      if (!Number.isInteger(line.quantity) || line.quantity < 1) {
        throw new OrderError(`${line.sku}: quantity must be a positive integer`);
      }
    }
    const order: Order = { id: this.nextId++, customer, lines, status: "open" };
    this.orders.set(order.id, order);
    return order;
  }

  get(id: number): Order {
    const order = this.orders.get(id);
    if (order === undefined) {
      throw new OrderError(`order ${id} not found`);
    }
    return order;
  }

  list(status?: Status): Order[] {
    const all = [...this.orders.values()];
    return status === undefined ? all : all.filter((o) => o.status === status);
  }

  move(id: number, to: Status): Order {
    const order = this.get(id);
    if (!TRANSITIONS[order.status].includes(to)) {
      throw new OrderError(`order ${id}: cannot go from ${order.status} to ${to}`);
    }
    order.status = to;
    return order;
  }
}
