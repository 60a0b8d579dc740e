/**
 * @koder/fleet-store-sqlite: Koder Fleet's Store port on an embedded SQLite file (better-sqlite3),
 * the default store of single-host clusters.
 */
export * as SqliteStore from "./SqliteStore.js"
export * as SqliteStoreError from "./SqliteStoreError.js"
