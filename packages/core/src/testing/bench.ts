/**
 * @koder/fleet-core/bench: the store benchmark driver, importable by any package's benchmark
 * without pulling in vitest (which `@koder/fleet-core/testing` needs for the contract suite).
 */
export * as StoreBench from "./StoreBench.js"
