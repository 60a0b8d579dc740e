/**
 * @koder/fleet-core: the Koder Fleet kernel. Runtime-agnostic model, ports and decisions;
 * adapters (SQLite, PostgreSQL, kbox) live in their own packages.
 */
export * as Fencing from "./coordination/Fencing.js"
export * as Keys from "./store/Keys.js"
export * as LeaderElection from "./coordination/LeaderElection.js"
export * as CompactionPolicy from "./store/CompactionPolicy.js"
export * as ContinueToken from "./store/ContinueToken.js"
export * as KeyOrder from "./store/KeyOrder.js"
export * as Store from "./store/Store.js"
export * as StoreError from "./store/StoreError.js"
export * as WatchFeed from "./store/WatchFeed.js"
