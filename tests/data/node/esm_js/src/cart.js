export function total(lines) {
  let sum = 0;
  for (const line of lines) {
    if (line.quantity < 0) {
      throw new RangeError(`negative quantity for ${line.sku}`);
    }
    sum += line.price * line.quantity;
  }
  return sum;
}

export const isEmpty = (lines) => lines.length === 0;
