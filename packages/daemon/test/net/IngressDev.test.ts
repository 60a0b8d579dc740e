/**
 * The ingress in `koder-fleet dev`, end to end: examples/hello's manifests as a user applies them
 * (its Deployment's pods are real Node.js processes on host ports) plus a second Service behind a
 * second host and a TLS host whose certificate is a Secret. Requests go through the dev process's
 * ingress listeners (ports chosen by the kernel, read from its start line) to real pods; a
 * Deployment scaled to zero turns into a 503 that names its Service.
 */
import { mkdtemp, readdir, readFile, rm } from "node:fs/promises"
import { type IncomingMessage, request } from "node:http"
import { request as httpsRequest } from "node:https"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { fileURLToPath } from "node:url"
import type { TLSSocket } from "node:tls"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { parseAllDocuments } from "yaml"
import * as Tls from "../../src/Tls.js"
import { client, credentials, eventually, start, type FleetProcess } from "../fixtures/FleetProcess.js"

type Json = Record<string, any>

const examples = fileURLToPath(new URL("../../../../examples/hello/", import.meta.url))

interface Reply {
  readonly status: number
  readonly text: string
  readonly subject?: string
}

const viaIngress = (port: number, host: string, path = "/", tls?: { ca: string }) =>
  new Promise<Reply>((resolve, reject) => {
    const options = { host: "127.0.0.1", port, path, headers: { host }, agent: false as const }
    const done = (res: IncomingMessage) => {
      let text = ""
      res.on("data", (d: Buffer) => (text += d.toString()))
      res.on("end", () =>
        resolve({ status: res.statusCode ?? 0, text, ...(tls === undefined ? {} : { subject: String((res.socket as TLSSocket).getPeerCertificate().subject.CN) }) })
      )
    }
    const req = tls === undefined ? request(options, done) : httpsRequest({ ...options, servername: host, ca: tls.ca }, done)
    req.on("error", reject)
    req.end()
  })

const echoApp = `require("node:http").createServer((req, res) => res.end("echo " + req.url + " via " + req.headers["x-forwarded-proto"])).listen(Number(process.env.PORT))`

describe("koder-fleet dev ingress", () => {
  let dir: string
  let dev: FleetProcess
  let api: ReturnType<typeof client>
  let token: string
  let httpPort = 0
  let httpsPort = 0
  let secureCa = ""

  const send = async (method: string, path: string, body?: unknown) => {
    const r = await api.send(method, path, { token, ...(body === undefined ? {} : { body: JSON.stringify(body) }) })
    if (r.status >= 300) throw new Error(`${method} ${path}: ${r.status} ${r.text}`)
    return r.json() as Json
  }

  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), "fleet-ingress-dev-"))
    dev = await start(
      ["--listen", "127.0.0.1:0", "--ingress-listen", "127.0.0.1:0", "--ingress-tls-listen", "127.0.0.1:0", "--node-name", "ingressnode"],
      "dev",
      { FLEET_DATA_DIR: dir }
    )
    const line = /koder-fleet dev: ingress on http:\/\/127\.0\.0\.1:(\d+), https:\/\/127\.0\.0\.1:(\d+)/.exec(dev.stdout())
    if (line === null) throw new Error(`no ingress line in:\n${dev.stdout()}`)
    httpPort = Number(line[1])
    httpsPort = Number(line[2])
    const creds = credentials(dev.kubeconfig)
    token = creds.token
    api = client(dev.port, creds.ca)

    // examples/hello as a user applies it.
    for (const file of (await readdir(examples)).filter((f) => f.endsWith(".yaml")).sort()) {
      for (const doc of parseAllDocuments(await readFile(join(examples, file), "utf8"))) {
        const o = doc.toJS() as Json
        const plural = { Deployment: "apis/apps/v1/namespaces/default/deployments", Service: "api/v1/namespaces/default/services", Ingress: "apis/networking.k8s.io/v1/namespaces/default/ingresses" }[o["kind"] as string]
        await send("POST", `/${plural}`, o)
      }
    }
    // A second Service behind a second host, and a TLS host.
    const pem = await Tls.selfSigned("secure.localhost", ["secure.localhost"])
    secureCa = pem.cert
    await send("POST", "/apis/apps/v1/namespaces/default/deployments", {
      apiVersion: "apps/v1",
      kind: "Deployment",
      metadata: { name: "echo" },
      spec: {
        replicas: 1,
        selector: { matchLabels: { app: "echo" } },
        template: {
          metadata: { labels: { app: "echo" } },
          spec: { terminationGracePeriodSeconds: 1, containers: [{ name: "echo", image: "node:20", command: ["node", "-e", echoApp], ports: [{ name: "http", containerPort: 8080 }] }] }
        }
      }
    })
    await send("POST", "/api/v1/namespaces/default/services", { apiVersion: "v1", kind: "Service", metadata: { name: "echo" }, spec: { selector: { app: "echo" }, ports: [{ name: "http", port: 80, targetPort: "http" }] } })
    await send("POST", "/api/v1/namespaces/default/secrets", {
      apiVersion: "v1",
      kind: "Secret",
      metadata: { name: "secure-localhost" },
      type: "kubernetes.io/tls",
      data: { "tls.crt": Buffer.from(pem.cert).toString("base64"), "tls.key": Buffer.from(pem.key).toString("base64") }
    })
    const toEcho = { path: "/", pathType: "Prefix", backend: { service: { name: "echo", port: { name: "http" } } } }
    await send("POST", "/apis/networking.k8s.io/v1/namespaces/default/ingresses", {
      apiVersion: "networking.k8s.io/v1",
      kind: "Ingress",
      metadata: { name: "more" },
      // No class: the IngressClass fleet the server created is the default.
      spec: {
        tls: [{ hosts: ["secure.localhost"], secretName: "secure-localhost" }],
        rules: [
          { host: "other.localhost", http: { paths: [toEcho] } },
          { host: "secure.localhost", http: { paths: [toEcho] } }
        ]
      }
    })
  }, 60_000)

  afterAll(async () => {
    api?.close()
    if (dev !== undefined && dev.child.exitCode === null) {
      dev.child.kill("SIGINT")
      const stopped = await Promise.race([dev.exited, new Promise((r) => setTimeout(() => r("timeout"), 15_000))])
      if (stopped === "timeout") dev.child.kill("SIGKILL")
    }
    if (dir !== undefined) await rm(dir, { recursive: true, force: true })
  }, 30_000)

  it("routes hello.localhost to examples/hello's pods (both replicas), other.localhost and secure.localhost (TLS, SNI) to echo", async () => {
    const seen = new Set<string>()
    await eventually(
      async () => {
        const r = await viaIngress(httpPort, "hello.localhost")
        if (r.status === 200) seen.add(/pod (\S+) on/.exec(r.text)?.[1] ?? "")
        return seen.size === 2 ? true : undefined
      },
      45_000,
      "both hello pods answering through the ingress"
    )
    expect([...seen].every((p) => p.startsWith("hello-"))).toBe(true)
    const hello = await viaIngress(httpPort, "hello.localhost:8080")
    expect(hello.text).toMatch(/^hello from Koder Fleet \(pod hello-/)

    const other = await eventually(async () => {
      const r = await viaIngress(httpPort, "other.localhost", "/a?b=c")
      return r.status === 200 ? r : undefined
    }, 30_000, "echo through the ingress")
    expect(other.text).toBe("echo /a?b=c via http")
    const secure = await viaIngress(httpsPort, "secure.localhost", "/s", { ca: secureCa })
    expect(secure).toEqual({ status: 200, text: "echo /s via https", subject: "secure.localhost" })

    const ingress = await send("GET", "/apis/networking.k8s.io/v1/namespaces/default/ingresses/hello")
    const status = await eventually(async () => (await send("GET", "/apis/networking.k8s.io/v1/namespaces/default/ingresses/more"))["status"]?.["loadBalancer"]?.["ingress"], 10_000, "Ingress status")
    expect(status).toEqual([{ ip: "127.0.0.1", ports: [{ port: httpPort, protocol: "TCP" }, { port: httpsPort, protocol: "TCP" }] }])
    expect(ingress["spec"]["ingressClassName"]).toBe("fleet")
  }, 90_000)

  it("answers 503 naming the Service once its Deployment is scaled to zero", async () => {
    await api.send("PATCH", "/apis/apps/v1/namespaces/default/deployments/echo", {
      token,
      body: JSON.stringify({ spec: { replicas: 0 } }),
      headers: { "content-type": "application/merge-patch+json" }
    })
    const r = await eventually(async () => {
      const reply = await viaIngress(httpPort, "other.localhost")
      return reply.status === 503 ? reply : undefined
    }, 30_000, "503 from the ingress")
    expect(r.text).toBe("503 Service Unavailable: Service default/echo:http has no ready endpoints.\n")
  }, 40_000)
})
