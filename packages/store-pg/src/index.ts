/**
 * @koder/fleet-store-pg: the Store port on PostgreSQL, for HA and multi-host control planes
 * (DESIGN §4). Built in the next issue; this package holds its place in the workspace.
 */
export const backend = "postgresql" as const
