/** Discount codes: percentages with a floor, and free shipping above a threshold. */

import { Order, orderTotal } from "./orders";

export interface Discount {
  code: string;
  percent: number;
  minimumCents: number;
}

export const FREE_SHIPPING_CENTS = 5000;
export const SHIPPING_CENTS = 499;

export function discountCents(order: Order, discount: Discount): number {
  const total = orderTotal(order);
  if (total < discount.minimumCents) {
    return 0;
  }
  return Math.round((total * discount.percent) / 100);
}

export function shippingCents(order: Order): number {
  return orderTotal(order) >= FREE_SHIPPING_CENTS ? 0 : SHIPPING_CENTS;
}

export function amountDue(order: Order, discount?: Discount): number {
  const off = discount === undefined ? 0 : discountCents(order, discount);
  return orderTotal(order) - off + shippingCents(order);
}
