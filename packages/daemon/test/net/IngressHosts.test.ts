/**
 * Ingress host ownership across namespaces in `koder-fleet dev`, end to end (issue 29 item 7):
 * tenant A's Ingress serves A's pod; tenant B (a `fleet:customer` ServiceAccount of its own
 * namespace) is refused an Ingress for A's host at the API, naming the host and A's namespace;
 * and when a conflict reaches the proxy anyway (B claimed a host first, then the admin's policy
 * ConfigMap gave it to A), plain and TLS traffic for the host goes to A only — `/`, `/login`,
 * and A's certificate by SNI — while B's Ingress has a Warning Event `HostConflict` naming A's
 * namespace and no address in its status.
 */
import { mkdtemp, rm } from "node:fs/promises"
import { type IncomingMessage, request } from "node:http"
import { request as httpsRequest } from "node:https"
import { tmpdir } from "node:os"
import { join } from "node:path"
import type { TLSSocket } from "node:tls"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import * as Tls from "../../src/Tls.js"
import { client, credentials, eventually, start, type FleetProcess } from "../fixtures/FleetProcess.js"

type Json = Record<string, any>

interface Reply {
  readonly status: number
  readonly text: string
  readonly subject?: string
}

const viaIngress = (port: number, host: string, path = "/", tls?: { ca: string }) =>
  new Promise<Reply>((resolve, reject) => {
    const options = { host: "127.0.0.1", port, path, headers: { host, cookie: "session=secret-of-a" }, agent: false as const }
    const done = (res: IncomingMessage) => {
      let text = ""
      res.on("data", (d: Buffer) => (text += d.toString()))
      res.on("end", () => resolve({ status: res.statusCode ?? 0, text, ...(tls === undefined ? {} : { subject: String((res.socket as TLSSocket).getPeerCertificate().subject.CN) }) }))
    }
    const req = tls === undefined ? request(options, done) : httpsRequest({ ...options, servername: host, ca: tls.ca }, done)
    req.on("error", reject)
    req.end()
  })

// Each tenant's pod says whose it is.
const whoApp = `require("node:http").createServer((req, res) => res.end(process.env.WHO + " " + req.url)).listen(Number(process.env.PORT))`

describe("ingress host ownership in koder-fleet dev", () => {
  let dir: string
  let dev: FleetProcess
  let api: ReturnType<typeof client>
  let admin: string
  let tenantB: string
  let httpPort = 0
  let httpsPort = 0
  const certs: Record<string, { cert: string; key: string }> = {}

  const call = (method: string, path: string, token: string, body?: unknown, contentType?: string) =>
    api.send(method, path, { token, ...(body === undefined ? {} : { body: JSON.stringify(body) }), ...(contentType === undefined ? {} : { headers: { "content-type": contentType } }) })
  const send = async (method: string, path: string, body?: unknown, token = admin) => {
    const r = await call(method, path, token, body)
    if (r.status >= 300) throw new Error(`${method} ${path}: ${r.status} ${r.text}`)
    return r.json() as Json
  }
  const ingressesOf = (ns: string) => `/apis/networking.k8s.io/v1/namespaces/${ns}/ingresses`
  const ingress = (name: string, host: string, service: string, pathType: "Exact" | "Prefix", secretName: string) => ({
    apiVersion: "networking.k8s.io/v1",
    kind: "Ingress",
    metadata: { name },
    spec: {
      tls: [{ hosts: [host], secretName }],
      rules: [{ host, http: { paths: [{ path: "/", pathType, backend: { service: { name: service, port: { number: 80 } } } }] } }]
    }
  })

  /** A tenant's namespace with its pod, Service and TLS Secret for `hosts`. */
  const tenant = async (ns: string, hosts: ReadonlyArray<string>) => {
    // PSA (when the server enforces it) is not what this test is about: the pods are plain processes.
    await send("POST", "/api/v1/namespaces", { apiVersion: "v1", kind: "Namespace", metadata: { name: ns, labels: { "pod-security.kubernetes.io/enforce": "privileged" } } })
    await send("POST", `/api/v1/namespaces/${ns}/pods`, {
      apiVersion: "v1",
      kind: "Pod",
      metadata: { name: "web", labels: { app: "web" } },
      spec: { terminationGracePeriodSeconds: 1, containers: [{ name: "web", image: "node:20", command: ["node", "-e", whoApp], env: [{ name: "WHO", value: ns }], ports: [{ name: "http", containerPort: 8080 }] }] }
    })
    await send("POST", `/api/v1/namespaces/${ns}/services`, { apiVersion: "v1", kind: "Service", metadata: { name: "web" }, spec: { selector: { app: "web" }, ports: [{ name: "http", port: 80, targetPort: "http" }] } })
    const pem = await Tls.selfSigned(`${ns} certificate`, [...hosts])
    certs[ns] = pem
    await send("POST", `/api/v1/namespaces/${ns}/secrets`, {
      apiVersion: "v1",
      kind: "Secret",
      metadata: { name: "cert" },
      type: "kubernetes.io/tls",
      data: { "tls.crt": Buffer.from(pem.cert).toString("base64"), "tls.key": Buffer.from(pem.key).toString("base64") }
    })
  }

  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), "fleet-ingress-hosts-"))
    dev = await start(["--listen", "127.0.0.1:0", "--ingress-listen", "127.0.0.1:0", "--ingress-tls-listen", "127.0.0.1:0", "--node-name", "hostsnode"], "dev", { FLEET_DATA_DIR: dir })
    const line = /koder-fleet dev: ingress on http:\/\/127\.0\.0\.1:(\d+), https:\/\/127\.0\.0\.1:(\d+)/.exec(dev.stdout())
    if (line === null) throw new Error(`no ingress line in:\n${dev.stdout()}`)
    httpPort = Number(line[1])
    httpsPort = Number(line[2])
    const creds = credentials(dev.kubeconfig)
    admin = creds.token
    api = client(dev.port, creds.ca)
    await tenant("team-a", ["shop.localhost", "late.localhost"])
    await tenant("team-b", ["shop.localhost", "late.localhost"])
    // Tenant B: a ServiceAccount of team-b with fleet:customer there, as a customer gets it.
    await send("POST", "/api/v1/namespaces/team-b/serviceaccounts", { apiVersion: "v1", kind: "ServiceAccount", metadata: { name: "bob" } })
    await send("POST", "/apis/rbac.authorization.k8s.io/v1/namespaces/team-b/rolebindings", {
      apiVersion: "rbac.authorization.k8s.io/v1",
      kind: "RoleBinding",
      metadata: { name: "customer-bob" },
      roleRef: { apiGroup: "rbac.authorization.k8s.io", kind: "ClusterRole", name: "fleet:customer" },
      subjects: [{ kind: "ServiceAccount", name: "bob", namespace: "team-b" }]
    })
    const issued = await send("POST", "/api/v1/namespaces/team-b/serviceaccounts/bob/token", { apiVersion: "authentication.k8s.io/v1", kind: "TokenRequest", spec: { audiences: [], expirationSeconds: 3600 } })
    tenantB = String(issued["status"]["token"])
    // Tenant A's Ingress for its host.
    await send("POST", ingressesOf("team-a"), ingress("shop", "shop.localhost", "web", "Prefix", "cert"))
  }, 90_000)

  afterAll(async () => {
    api?.close()
    if (dev !== undefined && dev.child.exitCode === null) {
      dev.child.kill("SIGINT")
      const stopped = await Promise.race([dev.exited, new Promise((r) => setTimeout(() => r("timeout"), 30_000))])
      if (stopped === "timeout") dev.child.kill("SIGKILL")
    }
    if (dir !== undefined) await rm(dir, { recursive: true, force: true })
  }, 45_000)

  it("serves tenant A's host from A's pod and refuses tenant B's Ingress for it at the API", async () => {
    const a = await eventually(async () => {
      const r = await viaIngress(httpPort, "shop.localhost", "/login")
      return r.status === 200 ? r : undefined
    }, 45_000, "team-a's pod through the ingress")
    expect(a.text).toBe("team-a /login")

    // B as the tenant it is: allowed to create Ingresses in its namespace, but not for A's host.
    const refused = await call("POST", ingressesOf("team-b"), tenantB, ingress("hijack", "shop.localhost", "web", "Exact", "cert"))
    expect(refused.status).toBe(422)
    const status = refused.json() as Json
    expect(status["kind"]).toBe("Status")
    expect(status["details"]["causes"]).toEqual([expect.objectContaining({ field: "spec.rules[0].host" })])
    expect(status["message"]).toContain('host "shop.localhost" is owned by namespace "team-a"')
    // The same tenant may claim a host nobody owns.
    const own = await call("POST", ingressesOf("team-b"), tenantB, ingress("own", "b.localhost", "web", "Prefix", "cert"))
    expect(own.status).toBe(201)
    const b = await eventually(async () => {
      const r = await viaIngress(httpPort, "b.localhost", "/")
      return r.status === 200 ? r : undefined
    }, 45_000, "team-b's pod through its own host")
    expect(b.text).toBe("team-b /")
    // A is still A's, on both listeners.
    expect((await viaIngress(httpPort, "shop.localhost", "/")).text).toBe("team-a /")
    expect(await viaIngress(httpsPort, "shop.localhost", "/login", { ca: certs["team-a"]!.cert })).toEqual({ status: 200, text: "team-a /login", subject: "team-a certificate" })
  }, 90_000)

  it("when a conflict reaches the proxy, the owner keeps the traffic and the certificate, and the loser gets a Warning Event and no address", async () => {
    // B claims late.localhost first (nobody owns it yet) and is served.
    expect((await call("POST", ingressesOf("team-b"), tenantB, ingress("late", "late.localhost", "web", "Exact", "cert"))).status).toBe(201)
    await eventually(async () => ((await viaIngress(httpPort, "late.localhost", "/")).text === "team-b /" ? true : undefined), 30_000, "team-b serving late.localhost")
    await eventually(async () => ((await send("GET", `${ingressesOf("team-b")}/late`))["status"]?.["loadBalancer"]?.["ingress"]?.length === 1 ? true : undefined), 15_000, "team-b's address")
    // The tenant cannot write the policy; the admin gives the host to team-a.
    const policy = { apiVersion: "v1", kind: "ConfigMap", metadata: { name: "fleet-ingress-hosts", namespace: "kube-system" }, data: { "team-a": "late.localhost" } }
    expect((await call("POST", "/api/v1/namespaces/kube-system/configmaps", tenantB, policy)).status).toBe(403)
    await send("POST", "/api/v1/namespaces/kube-system/configmaps", policy)
    // A's Ingress for it is admitted (the policy says so) although B's Ingress is older.
    await send("POST", ingressesOf("team-a"), ingress("late", "late.localhost", "web", "Prefix", "cert"))

    await eventually(async () => ((await viaIngress(httpPort, "late.localhost", "/")).text === "team-a /" ? true : undefined), 30_000, "team-a serving late.localhost")
    for (let i = 0; i < 5; i++) {
      for (const path of ["/", "/login"]) expect((await viaIngress(httpPort, "late.localhost", path)).text).toBe(`team-a ${path}`)
      expect(await viaIngress(httpsPort, "late.localhost", "/login", { ca: certs["team-a"]!.cert })).toEqual({ status: 200, text: "team-a /login", subject: "team-a certificate" })
    }

    const event = await eventually(
      async () => {
        const events = (await send("GET", "/api/v1/namespaces/team-b/events"))["items"] as ReadonlyArray<Json>
        return events.find((e) => e["reason"] === "HostConflict" && e["involvedObject"]["name"] === "late")
      },
      20_000,
      "the HostConflict Event"
    )
    expect(event["type"]).toBe("Warning")
    expect(event["involvedObject"]["kind"]).toBe("Ingress")
    expect(event["message"]).toContain('host "late.localhost" is reserved for namespace "team-a"')
    expect(event["message"]).toContain("this Ingress serves nothing")
    // Tenant B can read what happened to its Ingress.
    expect((await call("GET", "/api/v1/namespaces/team-b/events", tenantB)).status).toBe(200)
    await eventually(async () => {
      const lb = (await send("GET", `${ingressesOf("team-b")}/late`))["status"]?.["loadBalancer"]
      return lb === undefined || lb["ingress"] === undefined || lb["ingress"].length === 0 ? true : undefined
    }, 15_000, "team-b's Ingress without an address")
    // The winner has one.
    await eventually(async () => ((await send("GET", `${ingressesOf("team-a")}/late`))["status"]?.["loadBalancer"]?.["ingress"]?.length === 1 ? true : undefined), 15_000, "team-a's address")
  }, 120_000)
})
