import { defineConfig } from "tsup"

export default defineConfig({
  entry: { index: "src/index.ts", main: "src/main.ts" },
  format: ["esm"],
  target: "node20",
  dts: true,
  sourcemap: true,
  clean: true,
  // Bundling core lets esbuild keep only what the CLI uses (the client, not the kernel): a
  // command starts in a fraction of the time loading all of core's dist takes.
  noExternal: ["@koder/fleet-core"]
})
