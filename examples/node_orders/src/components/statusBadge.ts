/** A React-free component: a badge for an order's status, with a label people read. */

import { Status } from "../orders";

const LABELS: Record<Status, string> = {
  open: "Awaiting payment",
  paid: "Paid",
  shipped: "On its way",
  cancelled: "Cancelled",
};

export function statusBadge(status: Status, doc: Document = document): HTMLElement {
  const badge = doc.createElement("span");
  badge.className = `badge badge-${status}`;
  badge.setAttribute("role", "status");
  badge.textContent = LABELS[status];
  return badge;
}
