/**
 * Co-located mode (`koder-fleet dev --hub`, `koder-fleet server --hub`): a hub beside the cluster,
 * in the same process, with the cluster registered to it as its first member — the single-host
 * case of federation needs nothing more. The hub is the `hub` role's server (its own port, data
 * dir DATA/federation-hub, SQLite store, kubeconfig, metrics registry); the member is the cluster
 * itself, a Push member reached in-process as its own control plane (no kubeconfig, no join
 * token: both halves trust each other because they are one process).
 *
 *   server/dev ─▶ alongside: Server.run(hub) ─▶ PushMembers (local) ─▶ MemberAgent (hub ⇄ cluster, in-process)
 */
import { MetricRegistry } from "@koder/fleet-core"
import { Deferred, Effect, Either, Fiber } from "effect"
import { join } from "node:path"
import { ConfigError, RoleExit } from "../DaemonError.js"
import * as Server from "../Server.js"
import * as HubJoin from "./HubJoin.js"
import * as HubRole from "./HubRole.js"
import * as MemberTunnelLink from "./MemberTunnelLink.js"
import type * as PushMembers from "./PushMembers.js"

/** What `--hub` asks for. */
export interface Settings {
  /** The hub's HTTPS address (`--hub-listen`). */
  readonly listen: string
}

/** `--hub` and `--hub-listen` in dev's usage text. */
export const usage = `  --hub                  run a federation hub in this process too, with this cluster as its first
                         member (docs/federation.md); its kubeconfig is DIR/federation-hub/kubeconfig
  --hub-listen HOST:PORT the co-located hub's HTTPS address (default %s)`

/** Take `--hub` and `--hub-listen` out of `args` (in place); undefined: no hub asked for. */
export const take = (args: Array<string>, defaultListen: string): Either.Either<Settings | undefined, ConfigError> => {
  let hub = false
  let listen: string | undefined
  for (let i = 0; i < args.length; ) {
    const a = args[i]!
    if (a === "--hub") {
      hub = true
      args.splice(i, 1)
    } else if (a === "--hub-listen") {
      listen = args[i + 1]
      args.splice(i, 2)
    } else if (a.startsWith("--hub-listen=")) {
      listen = a.slice("--hub-listen=".length)
      args.splice(i, 1)
    } else i++
  }
  if (listen !== undefined && !hub) return Either.left(new ConfigError({ message: "--hub-listen needs --hub" }))
  if (hub && args.some((a) => a === "--join-hub" || a.startsWith("--join-hub="))) return Either.left(new ConfigError({ message: "--hub and --join-hub: a co-located cluster is already its hub's member" }))
  return Either.right(hub ? { listen: listen ?? defaultListen } : undefined)
}

/** The hub's configuration beside a member with this configuration (its own data dir and port, the member's region). */
export const hubConfig = (settings: Settings, member: Server.Config, local: PushMembers.Local) =>
  Either.map(
    HubRole.parse(["--listen", settings.listen, "--data-dir", join(member.dataDir, "federation-hub"), "--metrics-listen", "off", "--region", member.region], {}),
    (config): Server.Config => ({ ...config, hub: { ...config.hub!, local } })
  )

/**
 * Run the hub beside the member whose API `context` is, until the scope closes; ready once the
 * hub answers.
 */
export const alongside = (
  settings: Settings,
  member: Server.Config
) =>
  (context: Server.Alongside) =>
    Effect.gen(function* () {
      const config = hubConfig(settings, member, {
        member: member.memberName,
        region: member.region,
        endpoint: context.server,
        client: Server.loopbackClient(context.handle, context.controlPlaneToken, "fleet-member-agent"),
        answer: MemberTunnelLink.localAnswer(context.handle, context.controlPlaneToken),
        version: HubJoin.fleetVersion
      })
      if (Either.isLeft(config)) return yield* Effect.fail(new ConfigError({ message: `--hub: ${config.left.message}` }))
      const ready = yield* Deferred.make<void>()
      const hub = yield* Effect.forkScoped(
        Server.run(config.right, undefined, undefined, "hub", Deferred.succeed(ready, undefined)).pipe(
          // Its own metrics registry: the hub's requests are not the cluster's.
          Effect.provideService(MetricRegistry.MetricRegistry, MetricRegistry.make())
        )
      )
      yield* Effect.raceFirst(Deferred.await(ready), Fiber.join(hub))
    })

/** The `server` role's program (`RoleRuntime.run`), with a co-located hub when `--hub` is given. */
export const serverProgram = (argv: ReadonlyArray<string>): Effect.Effect<void, RoleExit> =>
  Effect.suspend(() => {
    const args = [...argv]
    if (args.includes("--help") || args.includes("-h")) return Server.program(args)
    const hub = Either.flatMap(take(args, "0.0.0.0:9400"), (settings) => Either.map(Server.parseFlags(args), (config) => ({ settings, config })))
    if (Either.isLeft(hub)) {
      console.error(`koder-fleet server: ${hub.left.message}\n\n${Server.usage}`)
      return Effect.fail(new RoleExit({ code: 2 }))
    }
    const { settings, config } = hub.right
    return settings === undefined ? Server.programWith(config, "server") : Server.programWith(config, "server", alongside(settings, config))
  })
