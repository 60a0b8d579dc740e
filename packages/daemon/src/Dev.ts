/**
 * `koder-fleet dev` (what `npm start` runs): a whole single-host cluster in one process — the API
 * server with its controllers and scheduler over embedded SQLite, the built-in box (process
 * driver) and one node agent that runs pods as processes on this host.
 *
 *   Server.run ─▶ alongside: NodeThread (a worker thread): Box.start (DATA/box, socket DATA/box/box.sock)
 *                                                          AgentProcess.run (node token in memory, the API in-process)
 *                             NodeAccess (logs, exec, signal from the box's socket) · usage → metrics.k8s.io
 *
 * Ctrl-C stops every workload the agent runs (graceful stops, then SIGKILL) before the box and the
 * server go: nothing is left behind. A dev process that dies without that (SIGKILL, a crash)
 * leaves its containers under their shims; the next start adopts them instead of starting copies.
 * The stop is bounded (`Shutdown`): pods get at most `--shutdown-grace`, and past the deadline or
 * on a second Ctrl-C every process of the box's pods and holders is SIGKILLed (`HardStop`) before
 * the process exits, whatever state the node is in.
 */
import { AgentUsage, Client, InProcess, MetricRegistry, NodeAccess, ServiceCatalog } from "@koder/fleet-core"
import { KboxClient } from "@koder/fleet-kbox-client"
import { Deferred, Duration, Effect, Either, Exit, FiberId, Schedule } from "effect"
import { homedir } from "node:os"
import { join, resolve } from "node:path"
import type { Worker } from "node:worker_threads"
import * as HostFacts from "./agent/HostFacts.js"
import * as HardStop from "./box/HardStop.js"
import * as CoLocatedHub from "./federation/CoLocatedHub.js"
import * as NodeThread from "./agent/NodeThread.js"
import { ConfigError, RoleExit } from "./DaemonError.js"
import * as ServiceProxy from "./net/ServiceProxy.js"
import * as StreamSockets from "./net/StreamSockets.js"
import * as Logging from "./observability/Logging.js"
import * as Server from "./Server.js"
import * as Shutdown from "./Shutdown.js"
import * as ShimFlag from "./box/ShimFlag.js"

/** `koder-fleet dev --help`. */
export const usage = `usage: koder-fleet dev [flags]

A single-host cluster: API server, controllers, scheduler, box and agent in one process.

  --data-dir DIR         everything: state.db, kubeconfig, box/ (containers, logs), agent/ (volumes)
                         (default ~/.koder-fleet, env FLEET_DATA_DIR)
  --listen HOST:PORT     HTTPS address (default 127.0.0.1:9300; port 0 picks a free one)
  --node-name NAME       the node's name (default: this host's name)
  --reserved LIST        resources kept from pods, e.g. cpu=500m,memory=1Gi (default none)
  --usage-interval DUR   how often container usage is sampled for metrics.k8s.io (default 15s)
  --nodeport-address A   where NodePort Services listen (default 127.0.0.1; off: nowhere)
  --lb-pool RANGES       LoadBalancer addresses (default 127.0.0.2-127.0.0.254, proxied on this host)
  --shim auto|sh         how the box starts containers (koder-fleet box --help; default auto)
  --driver process|runc  how the box runs containers: process (default) runs commands on this host;
                         runc runs OCI containers from images pulled from registries (root and runc)
  --registries FILE      the runc driver's registries.yaml: mirrors, http endpoints, CAs, credentials
                         (default DIR/registries.yaml, if present; koder-fleet box --help)
  --cgroups auto|none    the box's cgroups (koder-fleet box --help; default auto: limits enforced when root)
  --allow-unenforced-limits  run pods whose cpu/memory limits the box cannot enforce (no cgroup controllers:
                         unprivileged, or --cgroups none), each with a Warning Event (default: they fail,
                         UnenforceableLimits; docs/nodes.md)
  --shutdown-grace DUR   Ctrl-C: each pod gets at most this to stop (default 30s); dev exits within it
                         + 15s, and a second Ctrl-C kills every pod's processes at once (docs/nodes.md)
${CoLocatedHub.usage.replace("%s", "127.0.0.1:9400")}

Any other flag is the server's (koder-fleet server --help).`

/** What dev adds to the server's configuration. */
export interface Config {
  readonly server: Server.Config
  readonly nodeName: string
  readonly reserved: Readonly<Record<string, string>>
  readonly usageInterval: Duration.Duration
  /** Where node ports listen (undefined: off). */
  readonly nodePortAddress: string | undefined
  /** How the box starts containers (`koder-fleet box --shim`). */
  readonly shim: ShimFlag.Shim
  /** The box's cgroups (`koder-fleet box --cgroups`). */
  readonly cgroups: "auto" | "none"
  /** The box's driver (`koder-fleet box --driver`). */
  readonly driver: "process" | "runc"
  /** The runc driver's registries.yaml (undefined: the box's default). */
  readonly registries: string | undefined
  /** Pods with limits the box cannot enforce run anyway (`--allow-unenforced-limits`). */
  readonly allowUnenforcedLimits: boolean
  /** A hub in this process too, with this cluster its first member (`--hub`). */
  readonly hub: CoLocatedHub.Settings | undefined
}

const take = (args: Array<string>, flag: string): string | undefined => {
  for (let i = 0; i < args.length; i++) {
    const a = args[i]!
    if (a === flag) {
      const v = args[i + 1]
      args.splice(i, 2)
      return v
    }
    if (a.startsWith(`${flag}=`)) {
      args.splice(i, 1)
      return a.slice(flag.length + 1)
    }
  }
  return undefined
}

/** Parse dev's flags; the rest go to the server's parser with dev's defaults. */
export const parseFlags = (argv: ReadonlyArray<string>, env: Readonly<Record<string, string | undefined>> = process.env): Either.Either<Config, ConfigError> => {
  const args = [...argv]
  const nodeName = take(args, "--node-name") ?? HostFacts.defaultNodeName()
  const reservedText = take(args, "--reserved")
  const intervalText = take(args, "--usage-interval") ?? "15s"
  const nodePortText = take(args, "--nodeport-address") ?? "127.0.0.1"
  const shim = ShimFlag.parse(take(args, "--shim"))
  const cgroups = take(args, "--cgroups") ?? "auto"
  const driver = take(args, "--driver") ?? "process"
  const registries = take(args, "--registries")
  const allowAt = args.indexOf("--allow-unenforced-limits")
  if (allowAt >= 0) args.splice(allowAt, 1)
  if (!args.some((a) => a === "--lb-pool" || a.startsWith("--lb-pool="))) args.push("--lb-pool", "127.0.0.2-127.0.0.254")
  if (!args.some((a) => a === "--listen" || a.startsWith("--listen="))) args.push("--listen", "127.0.0.1:9300")
  if (!args.some((a) => a === "--data-dir" || a.startsWith("--data-dir="))) args.push("--data-dir", resolve(env["FLEET_DATA_DIR"] ?? join(homedir(), ".koder-fleet")))
  return Either.gen(function* () {
    const hub = yield* CoLocatedHub.take(args, "127.0.0.1:9400")
    const server = yield* Server.parseFlags(args, env)
    const usageInterval = yield* Server.parseDuration("--usage-interval", intervalText)
    if (typeof shim === "string") return yield* Either.left(new ConfigError({ message: shim }))
    if (cgroups !== "auto" && cgroups !== "none") return yield* Either.left(new ConfigError({ message: `--cgroups ${JSON.stringify(cgroups)}: expected auto or none` }))
    if (driver !== "process" && driver !== "runc") return yield* Either.left(new ConfigError({ message: `--driver ${JSON.stringify(driver)}: expected process or runc` }))
    const reserved = reservedText === undefined ? {} : yield* Either.mapLeft(HostFacts.parseReserved(reservedText), (why) => new ConfigError({ message: `--reserved: ${why}` }))
    return { server, nodeName, reserved, usageInterval, nodePortAddress: nodePortText === "off" ? undefined : nodePortText, shim: shim.shim, cgroups, driver, registries: registries === undefined ? undefined : resolve(registries), allowUnenforcedLimits: allowAt >= 0, hub }
  })
}

/** The node (box and agent, in their own thread) and what the API reaches them by, inside the server's scope. */
const alongside = (config: Config, thread: Worker, lost: Deferred.Deferred<never, { readonly message: string }>) => (context: Server.Alongside) =>
  Effect.forkScoped(node(config, thread, lost, context).pipe(Effect.catchAll((e) => Deferred.fail(lost, e)))).pipe(Effect.asVoid)

/**
 * The node, started beside the server rather than before its "ready": its thread loads the
 * agent's and the box's modules on the other core meanwhile, and it registers a moment after.
 */
const node = (config: Config, thread: Worker, lost: Deferred.Deferred<never, { readonly message: string }>, context: Server.Alongside) =>
  Effect.gen(function* () {
    const dataDir = config.server.dataDir
    const token = context.nodeToken(config.nodeName)
    const logging = Logging.settings()
    const node = yield* NodeThread.start({
      worker: thread,
      // The agent's requests, answered in-process here: same checks (authentication as its node,
      // RBAC, NodeRestriction), no TLS round trip to ourselves.
      handle: context.handle,
      registry: yield* MetricRegistry.MetricRegistry,
      onLost: (message) => Deferred.unsafeDone(lost, Exit.fail({ message })),
      // The node gets the grace and a little more to stop its pods; then what is left is killed.
      stopTimeoutMs: Shutdown.grace() + 10_000,
      hardStop: () => void HardStop.killAll(join(dataDir, "box")),
      data: {
        server: context.server,
        token,
        nodeName: config.nodeName,
        boxDir: join(dataDir, "box"),
        shim: config.shim,
        cgroups: config.cgroups,
        driver: config.driver,
        registries: config.registries ?? join(dataDir, "registries.yaml"),
        allowUnenforcedLimits: config.allowUnenforcedLimits,
        agentDir: join(dataDir, "agent"),
        reserved: config.reserved,
        region: config.server.region,
        clusterDns: context.dns === undefined ? undefined : `${context.dns.host}:${context.dns.port}`,
        logging: logging === undefined ? undefined : { format: logging.format, level: logging.level.label },
        stopGraceSeconds: Shutdown.grace() / 1000
      }
    })
    // Logs, exec, signals and usage: from the box over its socket, as a server reaches a node's box.
    const box = yield* KboxClient.make({ socketPath: node.socketPath })
    // NodePort and LoadBalancer Services, proxied on this host to the pods' host ports.
    const client = Client.make({ server: context.server, token, transport: InProcess.transport(context.handle, { client: `system:node:${node.nodeName}` }) })
    yield* ServiceProxy.make({ catalog: yield* ServiceCatalog.make(client), nodeAddress: config.nodePortAddress })
    context.setLocalNodes(new Map([[node.nodeName, NodeAccess.fromRuntime(box, node.nodeName, StreamSockets.dial)]]))
    yield* Effect.forkScoped(
      AgentUsage.report(box, Duration.toMillis(config.usageInterval)).pipe(
        Effect.flatMap((report) => context.metrics.record(node.nodeName, report)),
        Effect.catchAll(() => Effect.void),
        Effect.repeat(Schedule.spaced(config.usageInterval))
      )
    )
    // One write: whoever waits for the "runs pods" line has the limits line with it.
    const limits =
      node.box.limitsEnforced === false
        ? `\nkoder-fleet dev: the box cannot enforce cpu and memory limits (no cgroups: not root, or --cgroups none); pods with limits ${config.allowUnenforcedLimits ? "run unenforced, each with a Warning Event" : "are refused (UnenforceableLimits; --allow-unenforced-limits runs them unenforced)"}`
        : ""
    console.log(`koder-fleet dev: node ${node.nodeName} runs pods as processes (box ${node.box.name} ${node.box.version}, ${node.box.shim === undefined ? "" : `shim ${node.box.shim}, `}socket ${node.socketPath})${limits}`)
  })

/** The `dev` role's program (`RoleRuntime.run`): parse flags, run until interrupted; bad flags fail with exit code 2. */
export const program = (args: ReadonlyArray<string>): Effect.Effect<void, RoleExit> =>
  Effect.suspend(() => {
    if (args.includes("--help") || args.includes("-h")) return Effect.sync(() => console.log(usage))
    const config = parseFlags(args)
    if (Either.isLeft(config)) {
      console.error(`koder-fleet dev: ${config.left.message}\n\n${usage}`)
      return Effect.fail(new RoleExit({ code: 2 }))
    }
    const started = Date.now()
    const kubeconfig = join(config.right.server.dataDir, "kubeconfig")
    const ready = Effect.sync(() =>
      console.log(
        [
          `koder-fleet dev: ready in ${Date.now() - started} ms`,
          `  export KUBECONFIG=${kubeconfig}`,
          "  then: npx kfleet apply -f examples/hello && curl http://hello.localhost:8080/ (docs/cli.md), or any Kubernetes client",
          "  Ctrl-C stops the cluster and every workload it started"
        ].join("\n")
      )
    )
    // A second Ctrl-C, or a stop past its deadline: nothing the box started outlives the process.
    Shutdown.onHardStop(() => void HardStop.killAll(join(config.right.server.dataDir, "box")))
    // The node's thread goes last, once the server (and the node's pods with it) has stopped.
    return Effect.acquireUseRelease(
      Effect.sync(() => NodeThread.spawn()),
      (thread) => {
        const lost = Deferred.unsafeMake<never, { readonly message: string }>(FiberId.none)
        const node = alongside(config.right, thread, lost)
        const hub = config.right.hub
        const both = hub === undefined ? node : (context: Server.Alongside) => Effect.zipRight(node(context), CoLocatedHub.alongside(hub, config.right.server)(context))
        return Server.programWith(config.right.server, "dev", both, ready, Deferred.await(lost))
      },
      (thread) => Effect.promise(() => thread.terminate())
    )
  })
