/**
 * @koder/fleet-core/testing: what adapters and embedders use to prove themselves against the
 * kernel's contracts (the Store contract suite). The benchmark driver is `@koder/fleet-core/bench`.
 */
export * as StoreContract from "./StoreContract.js"
export * as RuntimeContract from "./RuntimeContract.js"
export * as SimulatedKubelet from "./SimulatedKubelet.js"
export * as TestCluster from "./TestCluster.js"
