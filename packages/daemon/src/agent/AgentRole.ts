/**
 * `koder-fleet agent`: a node agent as its own process, joining a server over HTTPS.
 *
 *   koder-fleet agent --server https://HOST:9300 --join-token ID.SECRET --ca-hash sha256:HEX
 *
 * The first start trusts nothing it has not checked: it fetches the server's certificate chain,
 * keeps the certificate whose public key hashes to `--ca-hash` (the line `koder-fleet server`
 * prints, as `kubeadm join --discovery-token-ca-cert-hash`), and from then on verifies the server
 * against that CA, saved as DATA/ca.crt. The join token is exchanged once for the node's own
 * token (DATA/node-token); later starts need neither flag. The box is another process
 * (`koder-fleet box`) reached over its Unix socket; the agent and the box can restart
 * independently and running containers are re-adopted.
 */
import { createHash, X509Certificate } from "node:crypto"
import { isIP } from "node:net"
import { homedir } from "node:os"
import { join, resolve } from "node:path"
import { connect, type PeerCertificate, type DetailedPeerCertificate } from "node:tls"
import { parseArgs } from "node:util"
import { Effect, Either } from "effect"
import { readIfExists, writeAtomic } from "../internal/files.js"
import { AgentStartError, RoleExit } from "../DaemonError.js"
import * as Logging from "../observability/Logging.js"
import * as MetricsServer from "../observability/MetricsServer.js"
import { KboxClient } from "@koder/fleet-kbox-client"
import * as AgentEndpoint from "./AgentEndpoint.js"
import * as AgentProcess from "./AgentProcess.js"
import * as HostFacts from "./HostFacts.js"
import { ServiceCatalog } from "@koder/fleet-core"
import * as DnsService from "../net/DnsService.js"
import * as ServiceProxy from "../net/ServiceProxy.js"
import * as RoleRuntime from "../RoleRuntime.js"
import * as Shutdown from "../Shutdown.js"
import * as EventLoopScheduler from "../v8/EventLoopScheduler.js"

/** `koder-fleet agent --help`. */
export const usage = `usage: koder-fleet agent --server URL [flags]

  --server URL          the API server, e.g. https://10.0.0.1:9300
  --join-token TOKEN    one-time join token (printed by koder-fleet server); needed on the first start only
  --ca-hash sha256:HEX  the hash of the cluster CA's public key (printed with the join token)
  --ca-file FILE        the cluster CA (PEM), instead of --ca-hash
  --token TOKEN         a node token instead of joining (env FLEET_NODE_TOKEN)
  --box-socket PATH     the box's socket (default ~/.koder-fleet/box/box.sock)
  --data-dir DIR        node token, CA, pod volumes (default ~/.koder-fleet/agent, env FLEET_DATA_DIR/agent)
  --node-name NAME      the node's name (default: this host's name)
  --reserved LIST       resources kept from pods, e.g. cpu=500m,memory=1Gi
  --region NAME         the node's region label (default local)
  --internal-ip IP      the address pods are reached at (default: the first non-loopback IPv4)
  --port N              the HTTPS port the API server reaches the agent on for logs and exec (default 9301; 0 picks one)
  --network-policy-strict  a pod a NetworkPolicy selects is not started when the box cannot enforce it
                        (default: it runs, with a Warning Event)
  --allow-unenforced-limits  run pods whose cpu/memory limits the box cannot enforce (no cgroup controllers),
                        each with a Warning Event; the Node says LimitsEnforced=False (default: such pods
                        fail with UnenforceableLimits)
  --nodeport-address A  where NodePort Services listen on this node (default 0.0.0.0; off: nowhere)
  --dns-listen ADDR:PORT  serve cluster DNS for this node's pods (default off)
  --dns-upstream ADDR   where that DNS forwards other names (default: none, they are refused)
  --cluster-dns ADDR:PORT the DNS host-mode pods are told of in FLEET_DNS (default: --dns-listen's address)
  --network MODE        host (default): pods share the host's network and get host ports; isolated: each pod its
                        own network namespace and IP from the node's pod CIDR, Services as nftables rules (root)
  --pod-dns ADDR:PORT   isolated: where pods' DNS queries (to their gateway, port 53) are sent (default: none)`

/** What the agent role is configured with. */
export interface Config {
  readonly server: string
  readonly joinToken: string | undefined
  readonly caHash: string | undefined
  readonly caFile: string | undefined
  readonly token: string | undefined
  readonly boxSocket: string
  readonly dataDir: string
  readonly nodeName: string | undefined
  readonly reserved: Readonly<Record<string, string>>
  readonly region: string | undefined
  readonly internalIP: string | undefined
  readonly port: number
  /** `--network-policy-strict`: fail pods closed when their NetworkPolicy cannot be enforced. */
  readonly networkPolicyStrict: boolean
  /** `--allow-unenforced-limits`: run pods whose limits the box cannot enforce, with a Warning. */
  readonly allowUnenforcedLimits: boolean
  readonly nodePortAddress: string | undefined
  readonly dnsListen: DnsService.Listen | undefined
  readonly dnsUpstream: { readonly host: string; readonly port: number } | undefined
  readonly clusterDns: string | undefined
  readonly network: "host" | "isolated"
  readonly podDns: { readonly address: string; readonly port: number } | undefined
}

/** Parse flags; Left is the message to print. */
export const parseFlags = (args: ReadonlyArray<string>, env: Readonly<Record<string, string | undefined>> = process.env): Either.Either<Config, string> => {
  let values: Record<string, string | boolean | undefined>
  try {
    values = parseArgs({
      args: [...args],
      options: {
        "network-policy-strict": { type: "boolean" as const },
        "allow-unenforced-limits": { type: "boolean" as const },
        ...Object.fromEntries(
        ["server", "join-token", "ca-hash", "ca-file", "token", "box-socket", "data-dir", "node-name", "reserved", "region", "internal-ip", "port", "nodeport-address", "dns-listen", "dns-upstream", "cluster-dns", "network", "pod-dns"].map((k) => [k, { type: "string" as const }])
      )
      },
      strict: true,
      allowPositionals: false
    }).values
  } catch (e) {
    return Either.left(e instanceof Error ? e.message : String(e))
  }
  const str = (k: string) => (typeof values[k] === "string" && values[k] !== "" ? (values[k] as string) : undefined)
  const server = str("server")
  if (server === undefined) return Either.left("--server is required")
  if (!/^https:\/\//.test(server)) return Either.left(`--server ${JSON.stringify(server)}: expected an https:// URL`)
  const caHash = str("ca-hash")
  if (caHash !== undefined && !/^sha256:[0-9a-f]{64}$/.test(caHash)) return Either.left(`--ca-hash ${JSON.stringify(caHash)}: expected sha256:<64 hex digits>`)
  const base = env["FLEET_DATA_DIR"] ?? join(homedir(), ".koder-fleet")
  const reserved = str("reserved") === undefined ? Either.right({}) : HostFacts.parseReserved(str("reserved")!)
  if (Either.isLeft(reserved)) return Either.left(`--reserved: ${reserved.left}`)
  const port = Number(str("port") ?? 9301)
  if (!Number.isInteger(port) || port < 0 || port > 65535) return Either.left(`--port ${JSON.stringify(str("port"))}: expected a port number`)
  const network = str("network") ?? "host"
  if (network !== "host" && network !== "isolated") return Either.left(`--network ${JSON.stringify(network)}: expected host or isolated`)
  const dnsText = str("pod-dns")
  const dnsMatch = dnsText === undefined ? undefined : /^(\d{1,3}(?:\.\d{1,3}){3}):(\d{1,5})$/.exec(dnsText)
  if (dnsText !== undefined && (dnsMatch == null || Number(dnsMatch[2]) < 1 || Number(dnsMatch[2]) > 65535))
    return Either.left(`--pod-dns ${JSON.stringify(dnsText)}: expected IPv4:PORT`)
  const dnsListen = DnsService.parseListen(str("dns-listen"), undefined)
  if (Either.isLeft(dnsListen)) return Either.left(dnsListen.left)
  const dnsUpstream = DnsService.parseUpstream(str("dns-upstream"))
  if (Either.isLeft(dnsUpstream)) return Either.left(dnsUpstream.left)
  const nodePortAddress = str("nodeport-address") ?? "0.0.0.0"
  return Either.right({
    nodePortAddress: nodePortAddress === "off" ? undefined : nodePortAddress,
    dnsListen: dnsListen.right,
    dnsUpstream: dnsUpstream.right,
    clusterDns: str("cluster-dns"),
    network,
    podDns: dnsMatch == null ? undefined : { address: dnsMatch[1]!, port: Number(dnsMatch[2]) },
    server: server.replace(/\/+$/, ""),
    joinToken: str("join-token"),
    caHash,
    caFile: str("ca-file"),
    token: str("token") ?? env["FLEET_NODE_TOKEN"],
    boxSocket: resolve(str("box-socket") ?? join(base, "box", "box.sock")),
    dataDir: resolve(str("data-dir") ?? join(base, "agent")),
    nodeName: str("node-name"),
    reserved: reserved.right,
    region: str("region"),
    internalIP: str("internal-ip"),
    port,
    networkPolicyStrict: values["network-policy-strict"] === true,
    allowUnenforcedLimits: values["allow-unenforced-limits"] === true
  })
}

/** `sha256:<hex>` of a certificate's public key (SubjectPublicKeyInfo DER). */
export const publicKeyHash = (pem: string): string =>
  `sha256:${createHash("sha256").update(new X509Certificate(pem).publicKey.export({ type: "spki", format: "der" })).digest("hex")}`

const toPem = (der: Buffer): string => `-----BEGIN CERTIFICATE-----\n${der.toString("base64").replace(/(.{64})/g, "$1\n").replace(/\n$/, "")}\n-----END CERTIFICATE-----\n`

/**
 * The CA among the certificates `server` presents whose public key hashes to `hash`. The
 * connection is not trusted for anything else: nothing is sent over it.
 */
export const discoverCa = (server: string, hash: string): Promise<string> =>
  new Promise((resolvePem, reject) => {
    const url = new URL(server)
    const host = url.hostname.replace(/^\[|\]$/g, "")
    // SNI carries names only (RFC 6066): an IP address is sent without it.
    const socket = connect({ host, port: Number(url.port || 443), ...(isIP(host) === 0 ? { servername: host } : {}), rejectUnauthorized: false }, () => {
      const seen = new Set<string>()
      let cert: PeerCertificate | DetailedPeerCertificate | undefined = socket.getPeerCertificate(true)
      while (cert !== undefined && cert.raw !== undefined && !seen.has(cert.fingerprint256)) {
        seen.add(cert.fingerprint256)
        const pem = toPem(cert.raw)
        if (publicKeyHash(pem) === hash) {
          socket.end()
          return resolvePem(pem)
        }
        cert = "issuerCertificate" in cert ? cert.issuerCertificate : undefined
      }
      socket.end()
      reject(new Error(`${server} presents no certificate whose public key matches ${hash}`))
    })
    socket.setTimeout(10_000, () => socket.destroy(new Error(`${server} did not answer the TLS handshake within 10 s`)))
    socket.once("error", (e) => reject(new Error(`cannot reach ${server}: ${e.message}`)))
  })

/** The cluster CA: the given file, the one saved by an earlier start, or discovered with the hash. */
export const resolveCa = async (config: Config): Promise<string> => {
  if (config.caFile !== undefined) {
    const pem = await readIfExists(config.caFile)
    if (pem === undefined) throw new Error(`--ca-file ${config.caFile}: no such file`)
    return pem
  }
  const savedFile = join(config.dataDir, "ca.crt")
  const saved = await readIfExists(savedFile)
  if (saved !== undefined && (config.caHash === undefined || publicKeyHash(saved) === config.caHash)) return saved
  if (config.caHash === undefined) throw new Error("no cluster CA: give --ca-hash (printed by koder-fleet server with the join token) or --ca-file")
  const pem = await discoverCa(config.server, config.caHash)
  await writeAtomic(savedFile, pem, 0o644)
  return pem
}

/** The `agent` role's program (`RoleRuntime.run`): parse flags, run until interrupted (SIGTERM/SIGINT); bad flags fail with exit code 2. */
export const program = (args: ReadonlyArray<string>): Effect.Effect<void, RoleExit> =>
  Effect.suspend(() => {
    if (args.includes("--help") || args.includes("-h")) return Effect.sync(() => console.log(usage))
    const parsed = parseFlags(args)
    if (Either.isLeft(parsed)) {
      console.error(`koder-fleet agent: ${parsed.left}\n\n${usage}`)
      return Effect.fail(new RoleExit({ code: 2 }))
    }
    return Logging.provide(run(parsed.right)).pipe(RoleRuntime.reportFailure("agent"))
  })

/** Run the agent until it is interrupted: then it stops, leaving its containers running for the next agent. */
const run = (config: Config) =>
  Effect.scoped(
    Effect.gen(function* () {
      // The endpoint's requests run on this role's fiber scheduler.
      const fibers = yield* EventLoopScheduler.defaultRuntime
      const ca = yield* Effect.tryPromise({ try: () => resolveCa(config), catch: (e) => new AgentStartError({ message: e instanceof Error ? e.message : String(e) }) })
      // The endpoint listens first: the Node advertises the port it actually got.
      const nodeName = config.nodeName ?? HostFacts.defaultNodeName()
      const internalIP = config.internalIP ?? HostFacts.defaultInternalIP()
      const box = yield* KboxClient.make({ socketPath: config.boxSocket })
      const endpoint = yield* Effect.acquireRelease(
        Effect.tryPromise({
          try: () =>
            AgentEndpoint.start({
              fibers,
              runtime: box,
              node: nodeName,
              caPem: ca,
              port: config.port,
              sans: [internalIP, nodeName, "localhost", "127.0.0.1"],
              metrics: MetricsServer.forAgent(config.server, AgentProcess.fetchTrusting(ca))
            }),
          catch: (e) => new AgentStartError({ message: `cannot listen on port ${config.port}: ${e instanceof Error ? e.message : String(e)}` })
        }),
        (e) => Effect.promise(() => e.close())
      )
      // DNS binds first (pods are told its address), and answers once the agent's client is up.
      const dns = DnsService.deferredView()
      const dnsAddress =
        config.dnsListen === undefined
          ? undefined
          : yield* DnsService.serveView(config.dnsListen, dns.view, { upstream: config.dnsUpstream, role: "agent" }).pipe(
              Effect.mapError((e) => new AgentStartError({ message: e.message }))
            )
      const clusterDns = config.clusterDns ?? (dnsAddress === undefined ? undefined : `${DnsService.advertised(dnsAddress.host, internalIP)}:${dnsAddress.port}`)
      const running = yield* AgentProcess.run({
        ...(clusterDns === undefined ? {} : { clusterDns }),
        server: config.server,
        ca,
        ...(config.token === undefined ? {} : { token: config.token }),
        ...(config.joinToken === undefined ? {} : { joinToken: config.joinToken }),
        boxSocket: config.boxSocket,
        dataDir: config.dataDir,
        reserved: config.reserved,
        nodeName,
        internalIP,
        port: endpoint.port,
        ...(config.region === undefined ? {} : { region: config.region }),
        ...(config.networkPolicyStrict ? { networkPolicyStrict: true } : {}),
        ...(config.allowUnenforcedLimits ? { allowUnenforcedLimits: true } : {}),
        ...(config.network === "isolated" ? { network: "pod" as const } : {}),
        ...(config.podDns === undefined ? {} : { podDns: config.podDns })
      })
      const catalog = yield* ServiceCatalog.make(running.client)
      dns.set(catalog)
      yield* ServiceProxy.make({ catalog, nodeAddress: config.nodePortAddress })
      if (dnsAddress !== undefined) console.log(`koder-fleet agent: DNS on ${dnsAddress.host}:${dnsAddress.port} (udp, tcp)`)
      console.log(`koder-fleet agent: node ${running.nodeName} registered with ${config.server}; running pods through ${config.boxSocket} (network ${config.network})`)
      const limits = (yield* Effect.orElseSucceed(running.runtime.info, () => undefined))?.capabilities.limits
      if (limits !== undefined && !(limits.cpu && limits.memory))
        console.log(
          `koder-fleet agent: the box cannot enforce cpu and memory limits (no cgroup controllers); pods with limits ${config.allowUnenforcedLimits ? "run unenforced, each with a Warning Event" : "are refused (UnenforceableLimits; --allow-unenforced-limits runs them unenforced)"}`
        )
      // Containers keep running: the next agent adopts them.
      yield* Effect.never.pipe(Effect.onInterrupt(() => Effect.sync(() => console.error(`koder-fleet agent: ${Shutdown.signalled() ?? "interrupted"}, stopping (containers keep running)`))))
    })
  )
