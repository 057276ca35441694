/** A React-free component: renders an order's summary as DOM nodes. */

import { Order, orderTotal } from "../orders";
import { formatCents } from "../util/money";

export function renderOrderSummary(order: Order, doc: Document = document): HTMLElement {
  const section = doc.createElement("section");
  section.className = `order-summary order-${order.status}`;
  const heading = doc.createElement("h2");
  heading.textContent = `Order #${order.id} for ${order.customer}`;
  section.append(heading);
  const list = doc.createElement("ul");
  for (const line of order.lines) {
    const item = doc.createElement("li");
    item.textContent = `${line.quantity} x ${line.sku}: ${formatCents(line.quantity * line.unitCents)}`;
    list.append(item);
  }
  section.append(list);
  const total = doc.createElement("p");
  total.className = "total";
  total.textContent = `Total ${formatCents(orderTotal(order))}`;
  section.append(total);
  if (order.status === "open") {
    const pay = doc.createElement("button");
    pay.type = "button";
    pay.textContent = "Pay now";
    section.append(pay);
  }
  return section;
}
