module.exports = {
  testEnvironment: "node",
  testMatch: ["<rootDir>/test/**/*.spec.js"],
};
