export * from "./cart";
export * from "./currency";
