/**
 * The roles one `koder-fleet` binary can run (DESIGN §1), and which of them this build provides.
 * Each role is wired in by the issue that builds it; until then it answers honestly.
 */

/** A process role of `koder-fleet`. */
export type Role = "server" | "agent" | "box" | "hub" | "dev"

/** Every role, in the order `koder-fleet --help` lists them. */
export const all: ReadonlyArray<Role> = ["dev", "server", "agent", "box", "hub"]

/** What each role runs. */
export const describe: Record<Role, string> = {
  dev: "server + agent + box in one process, embedded SQLite (single-host cluster)",
  server: "API server, controllers and scheduler of a member cluster",
  agent: "node agent: registers its Node and runs the pods bound to it",
  box: "the built-in kbox-compatible container runtime on a Unix socket",
  hub: "federation hub: member clusters join it; their registry, health and Work"
}

/** Roles this build can run; the rest print that they are not built yet. */
export const available: ReadonlyArray<Role> = ["dev", "server", "agent", "box", "hub"]

/** Parse a role name. */
export const parse = (name: string | undefined): Role | undefined =>
  all.find((role) => role === name)
