import { defineConfig } from "tsup"

export default defineConfig({
  // nodeThread: dev mode's node thread (agent/NodeThread.ts starts it beside main.js).
  entry: { index: "src/index.ts", main: "src/main.ts", nodeThread: "src/agent/NodeThreadMain.ts" },
  format: ["esm"],
  target: "node20",
  dts: true,
  sourcemap: true,
  clean: true
})
