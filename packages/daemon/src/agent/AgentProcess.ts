/**
 * The node agent as a process role (DESIGN §1, §8), usable in-process: it resolves the node's
 * credentials (a node token, or a one-time join token exchanged for one and kept in the data
 * dir), connects to the box over its Unix socket, reads the host's facts and runs core's `Agent`
 * with the host adapters (network prober, filesystem volume writer, host-port allocator) until
 * its scope closes. Containers keep running when it stops; the next agent re-adopts them.
 *
 *   credentials ─▶ Client (HTTPS with the cluster CA, or a given fetch or in-process transport)
 *   box socket ─▶ KboxClient (or the box's runtime itself, in dev) ─▶ runtime info ─▶ HostFacts.detect (capacity − reserved)
 *     ─▶ Agent.make (+ NetProber, FsVolumeWriter, NetHostPortAllocator)
 */
import { Agent, ApiClient, Client, InClusterEnv, Runtime } from "@koder/fleet-core"
import { KboxClient } from "@koder/fleet-kbox-client"
import { Effect, Schedule, type Scope } from "effect"
import { AgentStartError } from "../DaemonError.js"
import { join } from "node:path"
import { Agent as UndiciAgent, fetch as undiciFetch } from "undici"
import { ensurePrivateDir, readIfExists, writeAtomic } from "../internal/files.js"
import * as FsVolumeWriter from "./FsVolumeWriter.js"
import * as HostFacts from "./HostFacts.js"
import * as LocalPathVolumes from "./LocalPathVolumes.js"
import * as MemoryDir from "./MemoryDir.js"
import * as NetHostPortAllocator from "./NetHostPortAllocator.js"
import * as NetProber from "./NetProber.js"
import * as NodeNetwork from "../net/NodeNetwork.js"

/** How to run an agent. */
export interface Options {
  /** The API server's base URL, e.g. `https://10.0.0.1:9300`. */
  readonly server: string
  /** A bearer token: the node's own (`fleet-node_<name>_…`) or an administrator's. */
  readonly token?: string
  /** A one-time join token, exchanged for the node's token on first start (kept in `<dataDir>/node-token`). */
  readonly joinToken?: string
  /** The cluster CA (PEM) the server's certificate is checked against. */
  readonly ca?: string
  /** A fetch to reach the API with instead (dev mode's in-process API). */
  readonly fetch?: typeof globalThis.fetch
  /**
   * The API handler in this process (dev mode): the agent's requests go to it without the WHATWG
   * Requests, Responses and streams a fetch builds (`InProcess.transport`); a join still uses fetch.
   */
  readonly transport?: Client.Transport
  /** The box's Unix socket. */
  readonly boxSocket: string
  /**
   * The box's runtime in this process (dev mode's embedded box): driven directly instead of over
   * `boxSocket`, which saves an HTTP round trip, JSON and Schema decoding on every runtime call.
   */
  readonly runtime?: Runtime.RuntimeService
  /** The node's name (default: the host name). */
  readonly nodeName?: string
  /** The agent's directory: pod volumes under `pods/`, the node token. */
  readonly dataDir: string
  /** Resources kept back from pods (`HostFacts.parseReserved`). */
  readonly reserved?: Readonly<Record<string, string>>
  readonly region?: string
  readonly labels?: Readonly<Record<string, string>>
  /** The address pods are reached at (default: the first non-internal IPv4). */
  readonly internalIP?: string
  /** The agent's HTTPS port as the Node advertises it (default 9301). */
  readonly port?: number
  /** Fail pods closed when their NetworkPolicy cannot be enforced (`--network-policy-strict`). */
  readonly networkPolicyStrict?: boolean
  /** Run pods whose cpu/memory limits the box cannot enforce, with a Warning (`--allow-unenforced-limits`). */
  readonly allowUnenforcedLimits?: boolean
  /** Pod networking (default `host`: host ports); `pod`: isolated mode (root; the box must offer it). */
  readonly network?: "host" | "pod"
  /** Isolated mode: where the pods' DNS (their gateway's port 53) is sent. */
  readonly podDns?: { readonly address: string; readonly port: number }
  /** Isolated mode: the box's bridge (default `fleet0`). */
  readonly bridge?: string
  /** The cluster DNS (`host:port`) host-mode pods are told of in `FLEET_DNS`. */
  readonly clusterDns?: string
  /** Timings passed to the agent (tests shorten them). */
  readonly tuning?: Pick<Agent.Options, "workers" | "relistMs" | "resyncMs" | "leaseRenewMs" | "nodeStatusReportMs" | "objectTtlMs" | "stopGraceSeconds">
}

/** A running agent process. */
export interface Running {
  readonly agent: Agent.Agent
  readonly nodeName: string
  /** The runtime the agent drives (for logs and exec). */
  readonly runtime: Runtime.RuntimeService
  /** The client the agent uses (authenticated as the node). */
  readonly client: Client.Client
  /** Isolated mode's Service rules and routes. */
  readonly network: NodeNetwork.Running | undefined
}

/** The file a joined node keeps its token in. */
export const tokenFile = (dataDir: string): string => join(dataDir, "node-token")

/** A fetch that trusts `ca` and, given one, presents a client certificate (undici, so both apply to this client only). */
export const fetchTrusting = (ca: string | undefined, identity?: { readonly cert: string; readonly key: string }): typeof globalThis.fetch => {
  if (ca === undefined && identity === undefined) return globalThis.fetch
  const dispatcher = new UndiciAgent({ connect: { ...(ca === undefined ? {} : { ca }), ...(identity === undefined ? {} : { cert: identity.cert, key: identity.key }) } })
  return ((input: string, init?: RequestInit) => undiciFetch(input, { ...(init as object), dispatcher })) as unknown as typeof globalThis.fetch
}

const fail = (message: string) => Effect.fail(new AgentStartError({ message }))

/** The node's token: given, saved from an earlier join, or obtained now with the join token. */
export const credentials = (options: Pick<Options, "server" | "token" | "joinToken" | "dataDir">, fetch: typeof globalThis.fetch, nodeName: string) =>
  Effect.gen(function* () {
    if (options.token !== undefined) return options.token
    const saved = (yield* Effect.promise(() => readIfExists(tokenFile(options.dataDir))))?.trim()
    if (saved !== undefined && saved !== "") return saved
    if (options.joinToken === undefined) return yield* fail("no credentials: give a node token or a join token")
    const joiner = Client.make({ server: options.server, token: options.joinToken, fetch })
    const joined = yield* joiner
      .create({ apiVersion: "fleet.koder.dev/v1", kind: "NodeJoin", metadata: { name: nodeName }, spec: { nodeName } })
      .pipe(Effect.mapError((e) => new AgentStartError({ message: `joining as node ${nodeName} failed: ${e.status.message}` })))
    const token = String((joined["status"] as Record<string, unknown> | undefined)?.["token"] ?? "")
    if (token === "") return yield* fail(`joining as node ${nodeName} returned no token`)
    yield* Effect.promise(() => writeAtomic(tokenFile(options.dataDir), `${token}\n`, 0o600))
    return token
  })

/** Run an agent in the current scope. */
export const run = (options: Options): Effect.Effect<Running, AgentStartError, Scope.Scope> =>
  Effect.gen(function* () {
    const nodeName = options.nodeName ?? HostFacts.defaultNodeName()
    // The node token, the CA and pods' volumes: the agent's alone.
    yield* Effect.tryPromise({
      try: () => ensurePrivateDir(options.dataDir),
      catch: (e) => new AgentStartError({ message: `cannot create the data dir ${options.dataDir}: ${e instanceof Error ? e.message : String(e)}` })
    })
    const fetch = options.fetch ?? fetchTrusting(options.ca)
    const token = yield* credentials(options, fetch, nodeName)
    const client = Client.make({ server: options.server, token, ...(options.transport === undefined ? { fetch } : { transport: options.transport }) })
    const runtime = options.runtime ?? (yield* KboxClient.make({ socketPath: options.boxSocket }))
    // The box may still be starting: give it a few seconds.
    const info = yield* runtime.info.pipe(
      Effect.retry(Schedule.spaced("100 millis").pipe(Schedule.intersect(Schedule.recurs(50)))),
      Effect.catchAll((e) => fail(`the box at ${options.boxSocket} does not answer: ${e.message}`))
    )
    if (options.network === "pod" && !info.capabilities.podNetwork)
      return yield* fail(`isolated network mode: the box at ${options.boxSocket} gives pods no network of their own (capabilities.podNetwork is false: it needs root, namespaces and iproute2)`)
    const facts = HostFacts.detect({
      nodeName,
      dataDir: options.dataDir,
      ...(options.reserved === undefined ? {} : { reserved: options.reserved }),
      ...(options.region === undefined ? {} : { region: options.region }),
      ...(options.labels === undefined ? {} : { labels: options.labels }),
      ...(options.internalIP === undefined ? {} : { internalIP: options.internalIP }),
      ...(options.port === undefined ? {} : { port: options.port }),
      containerRuntimeVersion: `${info.name}://${info.version}`
    })
    const memoryDir = MemoryDir.forAgent(options.dataDir)
    const agent = yield* Agent.make({
      facts,
      dataDir: options.dataDir,
      // Secrets and tokens in memory (tmpfs), never on the disk.
      ...(memoryDir === undefined ? {} : { memoryDir }),
      ...(options.network === undefined ? {} : { network: options.network }),
      ...(options.networkPolicyStrict === undefined ? {} : { networkPolicyStrict: options.networkPolicyStrict }),
      ...(options.allowUnenforcedLimits === undefined ? {} : { allowUnenforcedLimits: options.allowUnenforcedLimits }),
      ...options.tuning,
      // FLEET_DNS: host-mode pods share the host's resolv.conf, so the cluster DNS is named here;
      // KUBERNETES_SERVICE_HOST/PORT: where in-cluster clients find the API.
      defaultEnv: {
        PATH: process.env["PATH"] ?? Agent.defaultPath,
        ...InClusterEnv.fromServer(options.server),
        ...(options.clusterDns === undefined ? {} : { FLEET_DNS: options.clusterDns })
      },
      runtimeName: info.name
    }).pipe(
      Effect.provideService(ApiClient.ApiClient, client),
      Effect.provideService(Runtime.Runtime, runtime),
      Effect.provide(NetProber.layer),
      Effect.provide(FsVolumeWriter.layer),
      Effect.provide(NetHostPortAllocator.layer)
    )
    // Local-path volumes made on this node: their directories go when their volumes do.
    yield* Effect.forkScoped(LocalPathVolumes.run({ root: HostFacts.localPathRoot(options.dataDir), client }))
    // Isolated mode: Services as nftables rules and routes to other nodes' pods, kept in sync.
    const network =
      options.network === "pod"
        ? yield* NodeNetwork.run({
            client,
            nodeName,
            ...(options.podDns === undefined ? {} : { dns: options.podDns }),
            ...(options.bridge === undefined ? {} : { bridge: options.bridge })
          })
        : undefined
    return { agent, nodeName, runtime, client, network }
  })
