import { defineConfig } from "tsup"

export default defineConfig({
  entry: { index: "src/index.ts", "testing/index": "src/testing/index.ts", "testing/bench": "src/testing/bench.ts", "testing/TestCluster": "src/testing/TestCluster.ts" },
  format: ["esm"],
  target: "node20",
  dts: true,
  sourcemap: true,
  clean: true
})
