/**
 * @koder/fleet-core/testing: what adapters and embedders use to prove themselves against the
 * kernel's contracts (the Store contract suite) and to measure themselves (the store benchmark).
 */
export * as StoreContract from "./StoreContract.js"
export * as StoreBench from "./StoreBench.js"
