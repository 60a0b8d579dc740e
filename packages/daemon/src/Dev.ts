/**
 * `koder-fleet dev` (what `npm start` runs): a whole single-host cluster in one process — the API
 * server with its controllers and scheduler over embedded SQLite, the built-in box (process
 * driver) and one node agent that runs pods as processes on this host.
 *
 *   Server.run ─▶ alongside: Box.start (DATA/box, socket DATA/box/box.sock)
 *                             AgentProcess.run (node token in memory, the API in-process)
 *                             NodeAccess (logs, exec, signal from the box) · usage → metrics.k8s.io
 *
 * Ctrl-C stops every workload the agent runs (graceful stops, then SIGKILL) before the box and the
 * server go: nothing is left behind. A dev process that dies without that (SIGKILL, a crash)
 * leaves its containers under their shims; the next start adopts them instead of starting copies.
 */
import { AgentUsage, InProcess, NodeAccess, ServiceCatalog } from "@koder/fleet-core"
import { Duration, Effect, Either, Schedule } from "effect"
import { homedir } from "node:os"
import { join, resolve } from "node:path"
import * as AgentProcess from "./agent/AgentProcess.js"
import * as HostFacts from "./agent/HostFacts.js"
import * as Box from "./box/Box.js"
import { ConfigError } from "./DaemonError.js"
import * as ServiceProxy from "./net/ServiceProxy.js"
import * as Server from "./Server.js"

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

Any other flag is the server's (koder-fleet server --help).`

/** What dev adds to the server's configuration. */
export interface Config {
  readonly server: Server.Config
  readonly nodeName: string
  readonly reserved: Readonly<Record<string, string>>
  readonly usageInterval: Duration.Duration
  /** Where node ports listen (undefined: off). */
  readonly nodePortAddress: string | undefined
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
  if (!args.some((a) => a === "--lb-pool" || a.startsWith("--lb-pool="))) args.push("--lb-pool", "127.0.0.2-127.0.0.254")
  if (!args.some((a) => a === "--listen" || a.startsWith("--listen="))) args.push("--listen", "127.0.0.1:9300")
  if (!args.some((a) => a === "--data-dir" || a.startsWith("--data-dir="))) args.push("--data-dir", resolve(env["FLEET_DATA_DIR"] ?? join(homedir(), ".koder-fleet")))
  return Either.gen(function* () {
    const server = yield* Server.parseFlags(args, env)
    const usageInterval = yield* Server.parseDuration("--usage-interval", intervalText)
    const reserved = reservedText === undefined ? {} : yield* Either.mapLeft(HostFacts.parseReserved(reservedText), (why) => new ConfigError({ message: `--reserved: ${why}` }))
    return { server, nodeName, reserved, usageInterval, nodePortAddress: nodePortText === "off" ? undefined : nodePortText }
  })
}

/** The box, the agent and what the API reaches them by, inside the server's scope. */
const alongside = (config: Config) => (context: Server.Alongside) =>
  Effect.gen(function* () {
    const dataDir = config.server.dataDir
    const boxDir = join(dataDir, "box")
    const boxConfig = Box.parseFlags(["--data-dir", boxDir, "--socket", join(boxDir, "box.sock")])
    if (typeof boxConfig === "string") return yield* Effect.fail(new ConfigError({ message: boxConfig }))
    const box = yield* Effect.acquireRelease(
      Effect.tryPromise({
        try: () => Box.start(boxConfig),
        catch: (e) => new ConfigError({ message: `cannot start the box in ${boxDir}: ${e instanceof Error ? e.message : String(e)}` })
      }),
      (b) => Effect.promise(() => b.close())
    )
    const running = yield* AgentProcess.run({
      server: context.server,
      token: context.nodeToken(config.nodeName),
      // The agent talks to the API in-process: same checks (authentication as its node, RBAC,
      // NodeRestriction), no TLS round trip to ourselves, no WHATWG Request/Response per call.
      fetch: InProcess.fetch(context.handle, { client: `system:node:${config.nodeName}` }),
      transport: InProcess.transport(context.handle, { client: `system:node:${config.nodeName}` }),
      boxSocket: box.socketPath,
      // The agent drives the embedded box directly: no kbox HTTP round trip per runtime call.
      runtime: box.runtime,
      nodeName: config.nodeName,
      dataDir: join(dataDir, "agent"),
      reserved: config.reserved,
      region: config.server.region,
      ...(context.dns === undefined ? {} : { clusterDns: `${context.dns.host}:${context.dns.port}` })
    }).pipe(Effect.mapError((e) => new ConfigError({ message: e.message })))
    // NodePort and LoadBalancer Services, proxied on this host to the pods' host ports.
    yield* ServiceProxy.make({ catalog: yield* ServiceCatalog.make(running.client), nodeAddress: config.nodePortAddress })
    // Runs before the box closes (finalizers run in reverse): Ctrl-C ends every workload.
    yield* Effect.addFinalizer(() => running.agent.stopAll)
    context.setLocalNodes(new Map([[running.nodeName, NodeAccess.fromRuntime(box.runtime, running.nodeName)]]))
    yield* Effect.forkScoped(
      AgentUsage.report(box.runtime, Duration.toMillis(config.usageInterval)).pipe(
        Effect.flatMap((report) => context.metrics.record(running.nodeName, report)),
        Effect.catchAll(() => Effect.void),
        Effect.repeat(Schedule.spaced(config.usageInterval))
      )
    )
    console.log(`koder-fleet dev: node ${running.nodeName} runs pods as processes (box ${box.info.name} ${box.info.version}, socket ${box.socketPath})`)
  })

/** `koder-fleet dev ...`: the exit code. */
export const main = async (args: ReadonlyArray<string>): Promise<number> => {
  if (args.includes("--help") || args.includes("-h")) {
    console.log(usage)
    return 0
  }
  const config = parseFlags(args)
  if (Either.isLeft(config)) {
    console.error(`koder-fleet dev: ${config.left.message}\n\n${usage}`)
    return 2
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
  return Server.mainWith(config.right.server, "dev", alongside(config.right), ready)
}
