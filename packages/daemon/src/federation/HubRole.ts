/**
 * The `hub` role (DESIGN §9): the same API server as `koder-fleet server` — HTTPS, kubeconfig,
 * RBAC, audit, SQLite or PostgreSQL with leader election — on its own port (9400) and data dir
 * (`~/.koder-fleet-hub`), serving the federation kinds (MemberCluster, Work,
 * CertificateSigningRequest), asking clients for certificates (members authenticate with the ones
 * it signs), running the federation controllers and none that would run workloads (see
 * HubControllers.ts). No ingress and no cluster DNS unless asked for.
 */
import { Duration, Effect, Either } from "effect"
import { homedir } from "node:os"
import { join } from "node:path"
import { RoleExit } from "../DaemonError.js"
import * as Server from "../Server.js"

/** `koder-fleet hub --help`. */
export const usage = `usage: koder-fleet hub [flags]

The federation hub: member clusters join it (koder-fleet server --join-hub), it keeps their
registry, health and work. Every flag of koder-fleet server applies, with these defaults:

  --listen HOST:PORT            HTTPS address (default 0.0.0.0:9400)
  --data-dir DIR                state, TLS material, kubeconfig (default ~/.koder-fleet-hub, env FLEET_HUB_DATA_DIR)
  --metrics-listen HOST:PORT    Prometheus metrics (default 127.0.0.1:9402)
  --dns-listen, --ingress-listen, --ingress-tls-listen   off unless given

and its own:

  --member-grace-period DURATION  a member whose heartbeat stopped this long is Unknown and
                                  tainted NoSchedule (default 40s, more than the members' 10 s
                                  heartbeat; nothing is ever evicted)
  --auto-approve-members PATTERN  approve new members whose whole name matches this regular
                                  expression without an administrator (a standing rule: whoever
                                  holds a join token can then join under such a name)
`


/** Split the hub's own flags from the server's, and give the server's the hub's defaults. */
export const parse = (args: ReadonlyArray<string>, env: Readonly<Record<string, string | undefined>> = process.env): Either.Either<Server.Config, { readonly message: string }> => {
  const rest: Array<string> = []
  let grace: string | undefined
  let approve: string | undefined
  for (let i = 0; i < args.length; i++) {
    const a = args[i]!
    if (a === "--member-grace-period") grace = args[++i]
    else if (a.startsWith("--member-grace-period=")) grace = a.slice("--member-grace-period=".length)
    else if (a === "--auto-approve-members") approve = args[++i]
    else if (a.startsWith("--auto-approve-members=")) approve = a.slice("--auto-approve-members=".length)
    else rest.push(a)
  }
  let autoApprove: RegExp | undefined
  if (approve !== undefined) {
    try {
      // The whole name must match: a pattern "east" approves east, not beast.
      autoApprove = new RegExp(`^(?:${approve})$`)
    } catch (e) {
      return Either.left({ message: `--auto-approve-members ${JSON.stringify(approve)}: ${e instanceof Error ? e.message : String(e)}` })
    }
  }
  const has = (flag: string) => rest.some((a) => a === flag || a.startsWith(`${flag}=`))
  const defaults = [
    ...(has("--listen") ? [] : ["--listen", "0.0.0.0:9400"]),
    ...(has("--data-dir") ? [] : ["--data-dir", env["FLEET_HUB_DATA_DIR"] ?? join(homedir(), ".koder-fleet-hub")]),
    ...(has("--metrics-listen") ? [] : ["--metrics-listen", "127.0.0.1:9402"]),
    ...(has("--dns-listen") ? [] : ["--dns-listen", "off"]),
    ...(has("--ingress-listen") ? [] : ["--ingress-listen", "off"]),
    ...(has("--ingress-tls-listen") ? [] : ["--ingress-tls-listen", "off"])
  ]
  let gracePeriodMs = 40_000
  if (grace !== undefined) {
    const d = Server.parseDuration("--member-grace-period", grace)
    // Members renew every 10 s: a shorter grace would call every member unreachable between beats.
    if (Either.isLeft(d) || Duration.toMillis(d.right) < 11_000) return Either.left({ message: `--member-grace-period ${JSON.stringify(grace)}: expected a duration longer than a member's 10 s heartbeat (e.g. 40s, 2m)` })
    gracePeriodMs = Duration.toMillis(d.right)
  }
  return Either.map(Server.parseFlags([...defaults, ...rest], env), (config) => ({ ...config, hub: { gracePeriodMs, ...(autoApprove === undefined ? {} : { autoApprove }) } }))
}

/** The `hub` role's program (`RoleRuntime.run`). */
export const program = (args: ReadonlyArray<string>): Effect.Effect<void, RoleExit> =>
  Effect.suspend(() => {
    if (args.includes("--help") || args.includes("-h")) return Effect.sync(() => console.log(usage))
    const config = parse(args)
    if (Either.isLeft(config)) {
      console.error(`koder-fleet hub: ${config.left.message}\n\n${usage}`)
      return Effect.fail(new RoleExit({ code: 2 }))
    }
    return Server.programWith(config.right, "hub")
  })
