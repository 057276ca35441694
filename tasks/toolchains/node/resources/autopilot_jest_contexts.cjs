// Loaded by Test Autopilot as a Jest reporter (`--reporters=<this file>`) when a suite run must
// also tell which test file ran which source lines: the evidence that maps tests to sources
// whatever their names. Jest keeps each test file's istanbul coverage on its result
// (`testResult.coverage`, the babel coverage provider) before it merges them into the report;
// this reporter reads it there, maps it back to the sources' own lines through their source
// maps (ts-jest's TypeScript), as Jest's coverage report does, and writes the lines each test
// file ran. It never changes Jest's own data, and a failure here never fails the run (the run
// then has no evidence). Under the v8 coverage provider a test file's result carries V8's raw
// data instead (`v8Coverage`), which this reporter does not read: it writes no lines then.
//
//   AUTOPILOT_CONTEXTS_FILE  where the JSON {test file: {source: [line, ...]}} is written
"use strict";

const fs = require("fs");
const { createRequire } = require("module");

/** istanbul's libraries as the project's own Jest has them, else the ones Node finds. */
function libraries(rootDir) {
  const requires = [];
  try {
    requires.push(createRequire(require.resolve("@jest/reporters", { paths: [rootDir] })));
  } catch (e) {
    // no Jest of the project's own here: ours (NODE_PATH) serve
  }
  requires.push(require);
  const load = (name) => {
    for (const req of requires) {
      try {
        return req(name);
      } catch (e) {
        // try the next
      }
    }
    return null;
  };
  return { coverage: load("istanbul-lib-coverage"), maps: load("istanbul-lib-source-maps") };
}

/** Line -> ran, istanbul's way: a line is the start line of its statements. */
function linesRan(data) {
  const lines = new Set();
  const counts = data.s || {};
  const where = data.statementMap || {};
  for (const key of Object.keys(counts)) {
    if (counts[key] > 0 && where[key] && where[key].start) {
      lines.add(where[key].start.line);
    }
  }
  return [...lines].sort((a, b) => a - b);
}

class AutopilotContexts {
  constructor(globalConfig) {
    this.out = process.env.AUTOPILOT_CONTEXTS_FILE;
    this.lib = libraries(globalConfig.rootDir || process.cwd());
    this.byTest = {};
    this.warned = false;
  }

  /** The test file's coverage on its sources' own lines (a copy: Jest's data is untouched). */
  async sourceCoverage(testResult) {
    const data = testResult.coverage;
    const sourceMaps = testResult.sourceMaps || {};
    const mapped = Object.values(data).some((d) => d && d.inputSourceMap);
    if (!mapped && Object.keys(sourceMaps).length === 0) {
      return data;
    }
    const { coverage, maps } = this.lib;
    if (!coverage || !maps) {
      throw new Error("istanbul-lib-coverage or istanbul-lib-source-maps not found");
    }
    const copy = coverage.createCoverageMap(JSON.parse(JSON.stringify(data)));
    const store = maps.createSourceMapStore();
    for (const [file, mapFile] of Object.entries(sourceMaps)) {
      // Jest 24/25: a transformer's map file, for data that carries none itself
      const own = copy.files().includes(file) && copy.fileCoverageFor(file).data.inputSourceMap;
      if (!own && mapFile && fs.existsSync(mapFile)) {
        store.registerURL(file, mapFile);
      }
    }
    let done = await store.transformCoverage(copy);
    if (done && done.map && typeof done.files !== "function") {
      done = done.map; // istanbul-lib-source-maps 3: {map, sourceFinder}
    }
    return done.toJSON();
  }

  async onTestResult(test, testResult) {
    if (!this.out || !testResult.coverage) {
      return;
    }
    try {
      const files = {};
      for (const [file, data] of Object.entries(await this.sourceCoverage(testResult))) {
        const lines = linesRan(data);
        if (lines.length) {
          files[data.path || file] = lines;
        }
      }
      this.byTest[testResult.testFilePath] = files;
    } catch (error) {
      if (!this.warned) {
        this.warned = true;
        process.stderr.write(`autopilot contexts: no evidence: ${error && error.message}\n`);
      }
    }
  }

  onRunComplete() {
    if (this.out) {
      fs.writeFileSync(this.out, JSON.stringify(this.byTest));
    }
  }
}

module.exports = AutopilotContexts;
