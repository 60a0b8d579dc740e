/**
 * The `server` role: a member cluster's API server over HTTPS (DESIGN §1, §5). It reads its flags,
 * prepares the data dir (TLS material, bootstrap credentials), opens the store, serves core's API
 * handler, and on SIGTERM/SIGINT (which interrupts it, `RoleRuntime`) drains and exits 0.
 *
 *   flags ─▶ data dir ─▶ Tls.ensure ─▶ Bootstrap.load ─▶ store ─▶ HttpServer ─▶ ApiServer
 *         ─▶ Bootstrap.publish (kubeconfig) ─▶ "listening" line ─▶ wait to be interrupted ─▶ drain
 */
import { isIP } from "node:net"
import { AdmissionPlugins, ApiServer, Authn, PodCidr, Binding, Client, Controllers, CsrApproval, Eviction, FlowControl, type Http, InProcess, MemberAuthentication, MemberAuthorizer, MetricsApi, MetricsSource, NodeAccess, Placement, PodExec, PodLog, PodProcessMetrics, PodStreams, Registry, type Store } from "@koder/fleet-core"
import { PgStore } from "@koder/fleet-store-pg"
import { SqliteStore } from "@koder/fleet-store-sqlite"
import { Cause, Duration, Effect, Either, Exit, Scope } from "effect"
import { homedir, hostname } from "node:os"
import { join, resolve } from "node:path"
import { parseArgs } from "node:util"
import * as Bootstrap from "./Bootstrap.js"
import * as ControlPlane from "./ControlPlane.js"
import { ConfigError, describe, type DaemonError, RoleExit } from "./DaemonError.js"
import * as Hub from "./federation/HubControllers.js"
import * as HubJoin from "./federation/HubJoin.js"
import * as MemberTunnelLink from "./federation/MemberTunnelLink.js"
import * as HttpServer from "./HttpServer.js"
import * as DnsService from "./net/DnsService.js"
import * as SpdyTunnel from "./net/SpdyTunnel.js"
import * as IngressProxy from "./net/IngressProxy.js"
import * as RemoteNodeAccess from "./RemoteNodeAccess.js"
import * as RoleRuntime from "./RoleRuntime.js"
import { ensurePrivateDir } from "./internal/files.js"
import * as Logging from "./observability/Logging.js"
import * as MetricsServer from "./observability/MetricsServer.js"
import * as NodeUsageScraper from "./observability/NodeUsageScraper.js"
import * as SecurityFlags from "./security/Flags.js"
import * as Security from "./security/Security.js"
import * as Shutdown from "./Shutdown.js"
import * as Tls from "./Tls.js"
import * as ListenAddress from "./internal/listenAddress.js"

/** Everything the server role is configured with. */
export interface Config {
  readonly dataDir: string
  readonly store: { readonly _tag: "sqlite"; readonly filename: string } | { readonly _tag: "postgres"; readonly url: string; readonly schema: string | undefined }
  readonly listen: { readonly host: string; readonly port: number }
  readonly region: string
  /** The Prometheus endpoint (observability/MetricsServer.ts); absent or undefined: off. */
  readonly metrics?: MetricsServer.Listen
  readonly tls: { readonly sans: ReadonlyArray<string>; readonly cert: string | undefined; readonly key: string | undefined; readonly ca: string | undefined }
  readonly limits: Pick<
    HttpServer.Limits,
    "maxInFlight" | "maxWatches" | "requestTimeout" | "watchBudgetPerUser" | "firstRequestTimeout" | "maxConnectionsPerAddress"
  >
  /** Users' writes executing at once (API priority and fairness, core's FlowControl); 0: no limit. */
  readonly workloadSeats: number
  /** Controllers (and `scheduler`) not to run; `*`: none (an API-only server). */
  readonly disabledControllers: ReadonlyArray<string>
  /** Cluster DNS (net/DnsService.ts): where it listens (undefined: off) and where other names go. */
  readonly dns: { readonly listen: DnsService.Listen | undefined; readonly upstream: { readonly host: string; readonly port: number } | undefined }
  /** `--lb-pool`: LoadBalancer Service addresses (none: such Services stay pending). */
  readonly lbPool: string | undefined
  /** The CIDR nodes' pod CIDRs (`spec.podCIDR`, a /24 each) are cut from. */
  readonly clusterCidr: string
  /** Flags of the security components, passed through (see security/Context.ts). */
  readonly security: Readonly<Record<string, string | ReadonlyArray<string> | boolean | undefined>>
  /** How often remote agents are asked for their usage (metrics.k8s.io; default 15s, metrics-server's resolution). */
  readonly usageInterval?: Duration.Duration
  /** The HTTP(S) ingress (net/IngressProxy.ts); a listener undefined is off. */
  readonly ingress: { readonly http: IngressProxy.Listen | undefined; readonly https: IngressProxy.Listen | undefined; readonly timeouts: IngressProxy.Timeouts }
  /** The hub role (federation/Hub.ts): its kinds, member certificates and controllers. */
  readonly hub?: Hub.Settings
  /** A member of a hub (`--join-hub`): joins it and runs the member agent. */
  readonly joinHub?: HubJoin.Settings
  /** This cluster's name as a hub's member (`--member-name`; default: this host's name). */
  readonly memberName: string
}

/** `koder-fleet server --help`. */
export const usage = `usage: koder-fleet server [flags]

  --data-dir DIR               state, TLS material, kubeconfig (default ~/.koder-fleet, env FLEET_DATA_DIR)
  --store sqlite|postgres      where objects live (default sqlite, in DIR/state.db)
  --pg-url URL                 PostgreSQL URL for --store postgres (env FLEET_PG_URL)
  --pg-schema NAME             PostgreSQL schema (default fleet)
  --listen HOST:PORT           HTTPS address (default 0.0.0.0:9300; port 0 picks a free one)
  --region NAME                region label of new objects (default local)
  --join-hub URL               join the hub at URL as a member (pull mode: the member dials out)
  --hub-token TOKEN            the hub's join token (koder-fleet hub prints it), for the first join
  --hub-ca-hash sha256:HEX     the hub CA's public key hash (koder-fleet hub prints it)
  --member-name NAME           this member's name at the hub (default: the host name)
  --hub                        run a federation hub in this process too, with this cluster as its first
                               member (docs/federation.md); its kubeconfig is DIR/federation-hub/kubeconfig
  --hub-listen HOST:PORT       the co-located hub's HTTPS address (default 0.0.0.0:9400)
  --tls-san NAME               extra subject alternative name, IP or DNS (repeatable, comma-separated)
  --tls-cert FILE              serve this certificate (PEM) instead of a generated one; needs --tls-key
  --tls-key FILE               the key of --tls-cert (PEM)
  --tls-ca FILE                the CA of --tls-cert, written into the kubeconfig
  --max-requests-inflight N    concurrent non-watch requests per client (default 100)
  --max-watches-inflight N     concurrent watches per client (token or address) and per user (default 250)
  --watch-budget-per-user BYTES
                               bytes one user's watches may owe their clients, unread (default 64Mi; 0: no
                               limit); a watch that would pass it gets 429, a running one is closed
  --first-request-timeout DURATION
                               a connection must finish TLS and send its first request's headers in this
                               time, or it is closed (default 10s)
  --max-connections-per-ip N   connections one client address may hold at once (default 4096; 0: no limit)
  --usage-interval DURATION    how often joined agents are asked for their pods' usage, served as
                               metrics.k8s.io to kubectl top and the HPA (default 15s)
  --request-timeout DURATION   time limit of a non-watch request, e.g. 60s, 500ms, 2m (default 60s)
  --workload-seats N           users' writes served at once; more wait their turn, fairly by user, so the
                               nodes' and controllers' own requests go first (default 2; 0: no limit)
  --disable-controllers NAMES  controllers not to run, comma-separated (e.g. cronjob,scheduler); * runs none.
                               With --store postgres, controllers run only in the server holding the lease
  --cluster-cidr CIDR          nodes' pod CIDRs are /24 blocks of it (default 10.42.0.0/16; isolated network mode)
  --dns-listen HOST:PORT       cluster DNS, UDP and TCP (default 127.0.0.1:5353; off: none)
  --dns-upstream HOST[:PORT]   where DNS forwards names outside the cluster (default: none, they are refused)
  --lb-pool RANGES             addresses for LoadBalancer Services: FIRST-LAST ranges or CIDRs, comma-separated
                               (default none: they stay pending)
  --service-node-port-range R  node ports of NodePort/LoadBalancer Services (default 30000-32767)
  --ingress-listen HOST:PORT   the ingress's HTTP address (default 127.0.0.1:8080; off: none)
  --ingress-tls-listen HOST:PORT
                               the ingress's HTTPS address (default 127.0.0.1:8443; off: none)
  --ingress-timeout DURATION   how long the ingress waits for a Service's answer before 504 (default 60s)
  --ingress-connect-timeout DURATION
                               how long it tries to connect to one endpoint before the next (default 5s)${MetricsServer.usage}${SecurityFlags.usage}`

const fail = (message: string) => Either.left(new ConfigError({ message }))

/** `HOST:PORT`, `[V6]:PORT`, `:PORT` or `PORT`. */
export const parseListen = (text: string): Either.Either<Config["listen"], ConfigError> => {
  const address = ListenAddress.parse(text, { barePort: true })
  return address === undefined ? fail(`--listen ${JSON.stringify(text)}: expected HOST:PORT`) : Either.right(address)
}

/** `60s`, `500ms`, `2m`, `1h`, or plain seconds. */
export const parseDuration = (flag: string, text: string): Either.Either<Duration.Duration, ConfigError> => {
  const m = /^(\d+(?:\.\d+)?)(ms|s|m|h)?$/.exec(text.trim())
  if (m === null) return fail(`${flag} ${JSON.stringify(text)}: expected a duration such as 60s, 500ms or 2m`)
  const n = Number(m[1])
  const millis = { ms: 1, s: 1000, m: 60_000, h: 3_600_000 }[(m[2] ?? "s") as "ms" | "s" | "m" | "h"]
  return Either.right(Duration.millis(n * millis))
}

/** A count flag: a positive integer, or also 0 when `zeroMeans` says what 0 does. */
const parseCount = (flag: string, text: string | undefined, fallback: number, zeroMeans?: string): Either.Either<number, ConfigError> => {
  if (text === undefined) return Either.right(fallback)
  const n = Number(text)
  if (Number.isInteger(n) && (n > 0 || (n === 0 && zeroMeans !== undefined))) return Either.right(n)
  return fail(`${flag} ${JSON.stringify(text)}: ${zeroMeans === undefined ? "expected a positive integer" : `expected a whole number (0: ${zeroMeans})`}`)
}

/** A size in bytes: a whole number, optionally with a binary suffix (`64Mi`, `512Ki`, `1Gi`); 0 allowed. */
export const parseBytes = (flag: string, text: string | undefined, fallback: number): Either.Either<number, ConfigError> => {
  if (text === undefined) return Either.right(fallback)
  const m = /^(\d+)(Ki|Mi|Gi)?$/.exec(text.trim())
  const n = m === null ? NaN : Number(m[1]) * { "": 1, Ki: 1024, Mi: 1024 ** 2, Gi: 1024 ** 3 }[m[2] ?? ""]!
  return Number.isSafeInteger(n) ? Either.right(n) : fail(`${flag} ${JSON.stringify(text)}: expected a size in bytes such as 67108864, 64Mi or 1Gi`)
}

/** Parse the server's flags (after the role), with `env` for the defaults that have variables. */
export const parseFlags = (args: ReadonlyArray<string>, env: Readonly<Record<string, string | undefined>> = process.env): Either.Either<Config, ConfigError> =>
  Either.gen(function* () {
    const parsed = yield* Either.try({
      try: () =>
        parseArgs({
          args: [...args],
          strict: true,
          allowPositionals: false,
          options: {
            "data-dir": { type: "string" },
            store: { type: "string" },
            "pg-url": { type: "string" },
            "pg-schema": { type: "string" },
            listen: { type: "string" },
            region: { type: "string" },
            "tls-san": { type: "string", multiple: true },
            "metrics-listen": { type: "string" },
            "usage-interval": { type: "string" },
            "tls-cert": { type: "string" },
            "tls-key": { type: "string" },
            "tls-ca": { type: "string" },
            "max-requests-inflight": { type: "string" },
            "max-watches-inflight": { type: "string" },
            "watch-budget-per-user": { type: "string" },
            "first-request-timeout": { type: "string" },
            "max-connections-per-ip": { type: "string" },
            "workload-seats": { type: "string" },
            "request-timeout": { type: "string" },
            "disable-controllers": { type: "string", multiple: true },
            "cluster-cidr": { type: "string" },
            "dns-listen": { type: "string" },
            "dns-upstream": { type: "string" },
            "lb-pool": { type: "string" },
            "ingress-listen": { type: "string" },
            "ingress-tls-listen": { type: "string" },
            "ingress-timeout": { type: "string" },
            "ingress-connect-timeout": { type: "string" },
            "join-hub": { type: "string" },
            "hub-token": { type: "string" },
            "hub-ca-hash": { type: "string" },
            "member-name": { type: "string" },
            ...SecurityFlags.options
          }
        }).values,
      catch: (e) => new ConfigError({ message: describe(e) })
    })
    const dataDir = resolve(parsed["data-dir"] ?? env["FLEET_DATA_DIR"] ?? join(homedir(), ".koder-fleet"))
    const kind = parsed.store ?? "sqlite"
    let store: Config["store"]
    if (kind === "sqlite") store = { _tag: "sqlite", filename: join(dataDir, "state.db") }
    else if (kind === "postgres") {
      const url = parsed["pg-url"] ?? env["FLEET_PG_URL"]
      if (url === undefined) return yield* fail("--store postgres needs --pg-url (or FLEET_PG_URL)")
      store = { _tag: "postgres", url, schema: parsed["pg-schema"] }
    } else return yield* fail(`--store ${JSON.stringify(kind)}: expected sqlite or postgres`)
    if ((parsed["tls-cert"] === undefined) !== (parsed["tls-key"] === undefined)) return yield* fail("--tls-cert and --tls-key go together")
    const range = parsed["service-cluster-ip-range"]
    if (range !== undefined) {
      const ranges = AdmissionPlugins.ClusterIpAllocator.parseRanges(range)
      if (Either.isLeft(ranges)) return yield* fail(`--service-cluster-ip-range ${JSON.stringify(range)}: ${ranges.left}`)
    }
    const clusterCidr = parsed["cluster-cidr"] ?? PodCidr.defaultClusterCidr
    const cidrPlan = PodCidr.plan(clusterCidr)
    if (Either.isLeft(cidrPlan)) return yield* fail(`--cluster-cidr ${JSON.stringify(clusterCidr)}: ${cidrPlan.left}`)
    const joinHub = parsed["join-hub"]
    if (joinHub !== undefined && !/^https:\/\/[^/\s]+\/?$/.test(joinHub)) return yield* fail(`--join-hub ${JSON.stringify(joinHub)}: expected https://HOST:PORT`)
    const memberName = parsed["member-name"] ?? (hostname().toLowerCase().replace(/[^a-z0-9-]/g, "-").replace(/^-+/, "").slice(0, 50).replace(/-+$/, "") || "local")
    if (!/^[a-z0-9]([-a-z0-9]{0,48}[a-z0-9])?$/.test(memberName)) return yield* fail(`--member-name ${JSON.stringify(memberName)}: expected a DNS label of at most 50 characters`)
    const region = parsed.region ?? "local"
    if (!/^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$/.test(region)) return yield* fail(`--region ${JSON.stringify(region)}: expected a label value (lower-case letters, digits, '-', '.')`)
    return {
      dataDir,
      store,
      listen: yield* parseListen(parsed.listen ?? "0.0.0.0:9300"),
      region,
      metrics: yield* MetricsServer.parseListen(parsed["metrics-listen"]),
      ...(parsed["usage-interval"] === undefined ? {} : { usageInterval: yield* parseDuration("--usage-interval", parsed["usage-interval"]) }),
      tls: {
        sans: (parsed["tls-san"] ?? []).flatMap((s) => s.split(",")).map((s) => s.trim()).filter((s) => s !== ""),
        cert: parsed["tls-cert"],
        key: parsed["tls-key"],
        ca: parsed["tls-ca"]
      },
      disabledControllers: yield* parseDisabled(parsed["disable-controllers"] ?? []),
      clusterCidr,
      dns: {
        listen: yield* Either.mapLeft(DnsService.parseListen(parsed["dns-listen"], DnsService.defaultListen), (message) => new ConfigError({ message })),
        upstream: yield* Either.mapLeft(DnsService.parseUpstream(parsed["dns-upstream"]), (message) => new ConfigError({ message }))
      },
      lbPool: yield* parseLbPool(parsed["lb-pool"]),
      ingress: {
        http: yield* parseListener("--ingress-listen", parsed["ingress-listen"], "127.0.0.1:8080"),
        https: yield* parseListener("--ingress-tls-listen", parsed["ingress-tls-listen"], "127.0.0.1:8443"),
        timeouts: yield* parseIngressTimeouts(parsed["ingress-timeout"], parsed["ingress-connect-timeout"])
      },
      memberName,
      ...(joinHub === undefined
        ? {}
        : { joinHub: { hub: joinHub.replace(/\/$/, ""), token: parsed["hub-token"], caHash: parsed["hub-ca-hash"], member: memberName } }),
      security: Object.fromEntries(Object.keys(SecurityFlags.options).map((k) => [k, (parsed as Record<string, string | undefined>)[k]])),
      workloadSeats: yield* parseCount("--workload-seats", parsed["workload-seats"], FlowControl.defaultSeats, "no limit"),
      limits: {
        maxInFlight: yield* parseCount("--max-requests-inflight", parsed["max-requests-inflight"], HttpServer.defaults.maxInFlight),
        maxWatches: yield* parseCount("--max-watches-inflight", parsed["max-watches-inflight"], HttpServer.defaults.maxWatches),
        requestTimeout: parsed["request-timeout"] === undefined ? HttpServer.defaults.requestTimeout : yield* parseDuration("--request-timeout", parsed["request-timeout"]),
        watchBudgetPerUser: yield* parseBytes("--watch-budget-per-user", parsed["watch-budget-per-user"], HttpServer.defaults.watchBudgetPerUser),
        firstRequestTimeout:
          parsed["first-request-timeout"] === undefined ? HttpServer.defaults.firstRequestTimeout : yield* parseDuration("--first-request-timeout", parsed["first-request-timeout"]),
        maxConnectionsPerAddress: yield* parseCount("--max-connections-per-ip", parsed["max-connections-per-ip"], HttpServer.defaults.maxConnectionsPerAddress, "no limit")
      }
    }
  })

/** A listener flag: `HOST:PORT`, or `off`; explicit when given (then failing to bind it fails startup). */
const parseLbPool = (text: string | undefined): Either.Either<string | undefined, ConfigError> => {
  if (text === undefined || text === "" || text === "off") return Either.right(undefined)
  const pool = Controllers.ServiceLoadBalancer.parsePool(text)
  return Either.isLeft(pool) ? fail(`--lb-pool ${JSON.stringify(text)}: ${pool.left}`) : Either.right(text)
}

const parseListener = (flag: string, text: string | undefined, fallback: string): Either.Either<IngressProxy.Listen | undefined, ConfigError> => {
  if (text === "off") return Either.right(undefined)
  return Either.map(
    Either.mapLeft(parseListen(text ?? fallback), () => new ConfigError({ message: `${flag} ${JSON.stringify(text)}: expected HOST:PORT or off` })),
    (l) => ({ ...l, explicit: text !== undefined })
  )
}

const parseIngressTimeouts = (response: string | undefined, connect: string | undefined): Either.Either<IngressProxy.Timeouts, ConfigError> =>
  Either.gen(function* () {
    const responseMs = response === undefined ? IngressProxy.defaultTimeouts.responseMs : Duration.toMillis(yield* parseDuration("--ingress-timeout", response))
    const connectMs = connect === undefined ? IngressProxy.defaultTimeouts.connectMs : Duration.toMillis(yield* parseDuration("--ingress-connect-timeout", connect))
    return { responseMs, connectMs, idleMs: responseMs }
  })

const parseDisabled = (values: ReadonlyArray<string>): Either.Either<ReadonlyArray<string>, ConfigError> => {
  const names = values.flatMap((v) => v.split(",")).map((v) => v.trim()).filter((v) => v !== "")
  const known = new Set(["*", ...ControlPlane.names()])
  const unknown = names.filter((n) => !known.has(n))
  return unknown.length === 0
    ? Either.right(names)
    : fail(`--disable-controllers: unknown controller ${JSON.stringify(unknown[0])}; known: ${[...known].filter((k) => k !== "*").join(", ")}`)
}

const urlHost = (host: string) => (host.includes(":") ? `[${host}]` : host)

/** The host clients should dial: the loopback address when listening on every interface. */
export const advertisedHost = (bound: string): string => (bound === "0.0.0.0" ? "127.0.0.1" : bound === "::" ? "::1" : bound)

const openStore = (config: Config["store"]) =>
  config._tag === "sqlite"
    ? SqliteStore.make({ filename: config.filename })
    : PgStore.make(config.schema === undefined ? { url: config.url } : { url: config.url, schema: config.schema })

/** What runs inside the server's process besides the API and the control plane (the dev role's agent and box). */
export interface Alongside {
  /** The API's in-process handler; requests still pass authentication, authorization and admission. */
  readonly handle: (request: Omit<Http.ApiRequest, "user">) => Effect.Effect<Http.ApiResponse>
  /** A bearer token the API accepts as `system:node:<nodeName>` (group system:nodes), for an in-process agent. */
  readonly nodeToken: (nodeName: string) => string
  /** Nodes whose pods' processes (logs, exec, signal) this process reaches itself; others go to their agent's endpoint. */
  readonly setLocalNodes: (local: ReadonlyMap<string, NodeAccess.NodeAccess>) => void
  /** Where agents report resource usage (served as metrics.k8s.io, read by the HPA). */
  readonly metrics: MetricsSource.MetricsSourceService
  readonly store: Store.StoreService
  /** `https://host:port` as clients dial it, and the CA that signs its certificate (none: a publicly trusted one). */
  readonly server: string
  readonly caPem: string | undefined
  /** Where the cluster DNS answers (undefined: off), for what pods are told. */
  readonly dns: { readonly host: string; readonly port: number } | undefined
  /** A bearer token the API accepts as the control plane (the loopback's; in memory only). */
  readonly controlPlaneToken: string
}

/** A client of a server's own API through the loopback (the control plane's identity). */
export const loopbackClient = (handle: InProcess.Handle, token: string, client: string): Client.Client =>
  Client.make({ server: "https://loopback.fleet.internal", token, transport: InProcess.transport(handle, { client }) })

/** On a hub: a member presenting its client certificate is that member; anyone else authenticates as on any server. */
const memberOrUser = (store: Store.StoreService, security: Security.Security, headers: Readonly<Record<string, string | undefined>>) => {
  const certificate = MemberAuthentication.parse(headers[HttpServer.clientCertificateHeader])
  if (certificate === undefined) return security.authenticate(headers)
  return Effect.flatMap(MemberAuthentication.authenticate(store, certificate, security.transformer, Authn.bearer(headers)), (member) => (member !== undefined ? Effect.succeed(member) : security.authenticate(headers)))
}

/** Join the hub and run the member agent beside the control plane (in-process, as the control plane). */
const joinHub = (config: Config, settings: HubJoin.Settings, handle: InProcess.Handle, token: string, role: string) => {
  const local = loopbackClient(handle, token, "fleet-member-agent")
  const answer = MemberTunnelLink.localAnswer(handle, token)
  // The cluster runs on whatever happens to its membership; what went wrong is said.
  return HubJoin.run(settings, { ...config, local, answer, version: HubJoin.fleetVersion }).pipe(
    Effect.catchAllCause((c) => Effect.sync(() => console.error(`koder-fleet ${role}: hub: ${Cause.pretty(c)}`)))
  )
}

/**
 * Run the server until it is interrupted (a signal, `RoleRuntime`) or `stop` completes (default:
 * never), then drain and close; a failure of `stop` closes it without the drain first.
 */
export const run = (
  config: Config,
  stop: Effect.Effect<unknown, { readonly message: string }> = Effect.never,
  alongside?: (context: Alongside) => Effect.Effect<void, DaemonError | { readonly message: string }, Scope.Scope>,
  role = "server",
  ready: Effect.Effect<void> = Effect.void
): Effect.Effect<void, DaemonError | { readonly message: string }> =>
  Effect.scoped(
    Effect.gen(function* () {
      yield* Effect.tryPromise({
        try: () => ensurePrivateDir(config.dataDir),
        catch: (e) => new ConfigError({ message: `cannot create the data dir ${config.dataDir}: ${describe(e)}` })
      })
      const serviceRange = typeof config.security["service-cluster-ip-range"] === "string" ? config.security["service-cluster-ip-range"] : undefined
      const tls = yield* Tls.ensure({
        dataDir: config.dataDir,
        // In-cluster clients reach the API as kubernetes.default.svc or at its ClusterIP.
        // and clients dial the address it listens on, when that is one address.
        extraSans: [...config.tls.sans, ...(isIP(config.listen.host) !== 0 && advertisedHost(config.listen.host) === config.listen.host ? [config.listen.host] : []), ...Controllers.KubernetesService.sans(serviceRange)],
        ...(config.tls.cert === undefined ? {} : { certFile: config.tls.cert }),
        ...(config.tls.key === undefined ? {} : { keyFile: config.tls.key }),
        ...(config.tls.ca === undefined ? {} : { caFile: config.tls.ca })
      })
      const credentials = yield* Bootstrap.load(config.dataDir)
      const store = yield* MetricsServer.instrument(yield* openStore(config.store))

      // Close order (reverse of acquisition): HTTP drains first, then the API's watch caches,
      // then the store. The API server needs the bound address, so its scope is made up front.
      const apiScope = yield* Scope.make()
      yield* Effect.addFinalizer(() => Scope.close(apiScope, Exit.void))
      // The chain includes the CA, so a joining agent can pick it out by the hash it was given.
      const chain = tls.ca === undefined || tls.cert.includes(tls.ca.trim()) ? tls.cert : `${tls.cert.trimEnd()}\n${tls.ca}`
      // The hub asks for members' certificates (its own CA signs them).
      const clientCa = config.hub === undefined || tls.ca === undefined ? {} : { clientCa: tls.ca }
      const http = yield* HttpServer.make({ host: config.listen.host, port: config.listen.port, tls: { cert: chain, key: tls.key }, ...clientCa, ...config.limits })
      const host = advertisedHost(http.address.host)
      const address = `${urlHost(host)}:${http.address.port}`
      const registry = Registry.make({ federation: config.hub !== undefined })
      // The hub's API across members; its client reaches the hub as the control plane does (set once the API exists).
      const across = config.hub === undefined ? undefined : Hub.api()
      const hubRef: { client?: Client.Client } = {}
      if (across !== undefined) registry.put(across.aggregate(() => hubRef.client!))
      const security = yield* Security.make({
        dataDir: config.dataDir,
        store,
        registry,
        bootstrapTokenHash: credentials.hash,
        address,
        region: config.region,
        caPem: tls.ca,
        flags: config.security,
        hub: config.hub !== undefined
      }).pipe(Scope.extend(apiScope))
      // Usage samples agents report, served as metrics.k8s.io (what `top` and the HPA read).
      const metrics = MetricsSource.makeMemory()
      MetricsApi.install(registry, metrics, store, { transformer: security.transformer })
      const loopback = ControlPlane.loopback()
      // In-process agents authenticate as their node with a token that lives only in memory.
      const nodeTokens = new Map<string, string>()
      const nodeOf = (headers: Readonly<Record<string, string | undefined>>) => {
        for (const [node, token] of nodeTokens) if (ControlPlane.presents(headers, token)) return node
        return undefined
      }
      const plane: { explain?: Placement.Explain } = {}
      // Remote agents are reached with a client certificate the cluster CA signs (none when the
      // operator brought their own CA: then only in-process nodes are reachable).
      const nodeClient = yield* Effect.promise(() => Tls.issueNodeClient(config.dataDir).catch(() => undefined))
      const remote = nodeClient === undefined ? NodeAccess.none : RemoteNodeAccess.make(store, nodeClient)
      let access: NodeAccess.NodeAccess = remote
      // Joined agents' usage, scraped as metrics-server would (in-process nodes record their own).
      let localNodes: ReadonlySet<string> = new Set()
      if (nodeClient !== undefined)
        yield* Effect.forkIn(
          NodeUsageScraper.run({ store, client: nodeClient, metrics, interval: config.usageInterval ?? Duration.seconds(15), local: () => localNodes }),
          apiScope
        )
      const api = yield* ApiServer.make({
        store,
        registry,
        authenticate: (headers) => {
          if (loopback.matches(headers)) return Effect.succeed(ControlPlane.controllerUser)
          const node = nodeTokens.size === 0 ? undefined : nodeOf(headers)
          if (node !== undefined) return Effect.succeed(ControlPlane.nodeUser(node))
          return config.hub === undefined ? security.authenticate(headers) : memberOrUser(store, security, headers)
        },
        authorize: config.hub === undefined ? security.authorize : MemberAuthorizer.chain(security.authorize),
        admission: security.admission,
        transformer: security.transformer,
        flowControl: { seats: config.workloadSeats, maxWait: Duration.millis(Duration.toMillis(config.limits.requestTimeout) / 4) },
        subresources: [
          ...security.subresources,
          Binding.handler,
          Eviction.subresource,
          Placement.handler(() => plane.explain),
          ...(across === undefined ? [] : [CsrApproval.handler, ...across.subresources]),
          PodLog.handler(() => access),
          PodProcessMetrics.handler(() => access),
          PodStreams.execHandler(() => access),
          PodStreams.attachHandler(() => access),
          PodStreams.portForwardHandler(() => access, SpdyTunnel.tunnel),
          PodExec.signalHandler(() => access)
        ],
        ...(security.audit === undefined ? {} : { audit: security.audit }),
        region: config.region,
        address,
        ready: () => !http.draining()
      }).pipe(Scope.extend(apiScope))
      hubRef.client = loopbackClient(api.handle, loopback.token, "fleet-hub")
      http.serve(api.handle)
      const metricsServer = yield* MetricsServer.start({
        listen: config.metrics,
        gate: MetricsServer.gate(security.authenticate, security.authorize),
        warn: (message) => console.error(`koder-fleet ${role}: ${message}`)
      }).pipe(Scope.extend(apiScope))
      // Controllers stop before the API's watch caches close (scope finalizers run in reverse).
      yield* ControlPlane.start(api.handle, loopback.token, {
        store,
        elect: config.store._tag === "postgres",
        disabled: config.hub === undefined ? config.disabledControllers : [...config.disabledControllers, ...Hub.notOnTheHub],
        // The hub's Push members are dialled by one hub replica at a time: the leader.
        ...(config.hub === undefined || across === undefined ? {} : { extra: Hub.reconcilers(config.hub, config.dataDir), leading: across.run(hubRef.client!, config.hub.local) }),
        controllers: {
          nodeIpam: { clusterCidr: config.clusterCidr },
          // The Service's endpoint must be an address; a host name (a --listen of "localhost") has none to publish.
          kubernetesService: {
            ...(isIP(host) === 0 ? {} : { endpoint: { address: host, port: http.address.port } }),
            ...(serviceRange === undefined ? {} : { serviceRange })
          },
          rootCaPublisher: { caPem: tls.ca ?? tls.cert },
          ...(config.lbPool === undefined ? {} : { serviceLoadBalancer: { pool: config.lbPool } }),
          ...(typeof config.security["service-cluster-ip-range"] === "string" ? { clusterIpRepair: { range: config.security["service-cluster-ip-range"] } } : {})
        }
      }, plane).pipe(Scope.extend(apiScope))

      // The ingress reads the cluster and writes Ingress status as the control plane does (loopback).
      const ingress =
        config.ingress.http === undefined && config.ingress.https === undefined
          ? undefined
          : yield* IngressProxy.make({ client: loopbackClient(api.handle, loopback.token, "fleet-ingress"), ...config.ingress }).pipe(Scope.extend(apiScope))

      // Cluster DNS reads Services and EndpointSlices as the control plane does (loopback).
      const dns =
        config.dns.listen === undefined
          ? undefined
          : yield* DnsService.serve(loopbackClient(api.handle, loopback.token, "fleet-dns"), config.dns.listen, { upstream: config.dns.upstream, role }).pipe(
              Effect.mapError((e) => new ConfigError({ message: e.message })),
              Scope.extend(apiScope)
            )

      // A member of a hub: join it (pull mode) and run the member agent beside the control plane.
      if (config.joinHub !== undefined) yield* Effect.forkIn(joinHub(config, config.joinHub, api.handle, loopback.token, role), apiScope)

      if (alongside !== undefined) {
        yield* alongside({
          dns: dns === undefined ? undefined : { host: advertisedHost(dns.host), port: dns.port },
          handle: api.handle,
          nodeToken: (node) => {
            const token = nodeTokens.get(node) ?? ControlPlane.loopback().token
            nodeTokens.set(node, token)
            return token
          },
          setLocalNodes: (local) => {
            localNodes = new Set(local.keys())
            access = NodeAccess.routed(local, remote)
          },
          metrics,
          store,
          server: `https://${address}`,
          caPem: tls.ca,
          controlPlaneToken: loopback.token
        }).pipe(Scope.extend(apiScope))
      }

      const published = yield* Bootstrap.publish(config.dataDir, credentials, { server: `https://${address}`, caPem: tls.ca })
      if (published.newToken !== undefined) {
        console.log(`koder-fleet ${role}: bootstrap admin token (shown only this once; it is in ${published.kubeconfig}): ${published.newToken}`)
      }
      if (published.warning !== undefined) console.error(`koder-fleet server: ${published.warning}`)
      for (const line of security.banner) console.log(`koder-fleet ${role}: ${line}`)
      if (ingress !== undefined) console.log(`koder-fleet ${role}: ${IngressProxy.describeListeners(ingress)}`)
      if (dns !== undefined) console.log(`koder-fleet ${role}: DNS on ${urlHost(dns.host)}:${dns.port} (udp, tcp)`)
      if (metricsServer !== undefined) console.log(`koder-fleet ${role}: metrics on http://${urlHost(metricsServer.address.host)}:${metricsServer.address.port}/metrics`)
      console.log(`koder-fleet ${role} listening on https://${urlHost(http.address.host)}:${http.address.port} (kubeconfig: ${published.kubeconfig})`)
      yield* ready

      const drain = (why: unknown) =>
        Effect.suspend(() => {
          console.error(`koder-fleet ${role}: ${typeof why === "string" ? why : "stopping"}, draining`)
          return http.shutdown
        })
      // Interrupted (a signal): the drain still comes first, before the scope's finalizers close the rest.
      const why = yield* stop.pipe(Effect.onInterrupt(() => drain(Shutdown.signalled())))
      yield* drain(why)
    })
  )

/** The `server` role's program (`RoleRuntime.run`): parse flags, run until interrupted; bad flags fail with exit code 2. */
export const program = (args: ReadonlyArray<string>): Effect.Effect<void, RoleExit> =>
  Effect.suspend(() => {
    if (args.includes("--help") || args.includes("-h")) return Effect.sync(() => console.log(usage))
    const config = parseFlags(args)
    if (Either.isLeft(config)) {
      console.error(`koder-fleet server: ${config.left.message}\n\n${usage}`)
      return Effect.fail(new RoleExit({ code: 2 }))
    }
    return programWith(config.right, "server")
  })

/** Run a server (with what `alongside` adds) until interrupted; a failure is printed and ends it with exit code 1. */
export const programWith = (
  config: Config,
  role: string,
  alongside?: (context: Alongside) => Effect.Effect<void, DaemonError | { readonly message: string }, Scope.Scope>,
  ready?: Effect.Effect<void>,
  /** What else ends the server (default: nothing but an interruption); its failure ends it too, with exit code 1. */
  stop: Effect.Effect<unknown, { readonly message: string }> = Effect.never
): Effect.Effect<void, RoleExit> => Logging.provide(run(config, stop, alongside, role, ready)).pipe(RoleRuntime.reportFailure(role))
