/**
 * @koder/fleet-store-pg: Koder Fleet's Store port on PostgreSQL (pg), for HA and multi-host
 * control planes: dense commit-ordered revisions shared by several processes, group commit,
 * LISTEN/NOTIFY-woken watches read by revision, optional row-level-security tenancy.
 */
export * as PgAdmin from "./PgAdmin.js"
export * as PgStore from "./PgStore.js"
export * as PgStoreError from "./PgStoreError.js"
