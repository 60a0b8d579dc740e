/**
 * `/metrics` end to end: a real `koder-fleet server`, and a real Prometheus (Debian's package,
 * installed by .ci/run) on loopback with its own config and a temporary storage dir, scraping the
 * server with a ServiceAccount token bound to `system:monitoring` (`credentials_file`), then
 * queried over its HTTP API for the API request and work-queue series.
 */
import { spawn, type ChildProcess } from "node:child_process"
import { mkdtemp, rm, writeFile } from "node:fs/promises"
import { request as httpRequest } from "node:http"
import { createServer } from "node:net"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { client, credentials, eventually, start, type FleetProcess } from "../fixtures/FleetProcess.js"

const freePort = () =>
  new Promise<number>((resolve, reject) => {
    const s = createServer()
    s.once("error", reject)
    s.listen(0, "127.0.0.1", () => {
      const port = (s.address() as { port: number }).port
      s.close(() => resolve(port))
    })
  })

const get = (port: number, path: string, token?: string) =>
  new Promise<{ status: number; text: string; type: string }>((resolve, reject) => {
    const req = httpRequest({ host: "127.0.0.1", port, path, headers: token === undefined ? {} : { authorization: `Bearer ${token}` } }, (res) => {
      let text = ""
      res.setEncoding("utf8")
      res.on("data", (d: string) => (text += d))
      res.on("end", () => resolve({ status: res.statusCode ?? 0, text, type: String(res.headers["content-type"] ?? "") }))
    })
    req.on("error", reject)
    req.end()
  })

describe("Prometheus scrapes a server's /metrics", () => {
  let dir: string
  let server: FleetProcess
  let prometheus: ChildProcess | undefined
  let prometheusLog = ""
  let http: ReturnType<typeof client>
  let metricsPort: number
  let admin: string

  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), "fleet-prometheus-"))
    server = await start(["--data-dir", join(dir, "fleet"), "--listen", "127.0.0.1:0", "--metrics-listen", "127.0.0.1:0"])
    const m = /metrics on http:\/\/127\.0\.0\.1:(\d+)\/metrics/.exec(server.stdout())
    if (m === null) throw new Error(`no metrics line in:\n${server.stdout()}`)
    metricsPort = Number(m[1])
    const creds = credentials(server.kubeconfig)
    admin = creds.token
    http = client(server.port, creds.ca)
  })

  afterAll(async () => {
    http?.close()
    if (prometheus?.exitCode === null) {
      prometheus.kill("SIGTERM")
      await new Promise((r) => prometheus?.once("exit", r))
    }
    if (server?.child.exitCode === null) server.child.kill("SIGKILL")
    await rm(dir, { recursive: true, force: true })
  })

  it("refuses scrapes without a token or without the system:monitoring grant", async () => {
    const anonymous = await get(metricsPort, "/metrics")
    expect(anonymous.status).toBe(401)
    const post = async (path: string, body: unknown) => {
      const r = await http.send("POST", path, { token: admin, body: JSON.stringify(body) })
      expect(r.status, `${path}: ${r.text}`).toBeLessThan(300)
      return r.json()
    }
    await post("/api/v1/namespaces", { apiVersion: "v1", kind: "Namespace", metadata: { name: "monitoring" } })
    await post("/api/v1/namespaces/monitoring/serviceaccounts", { apiVersion: "v1", kind: "ServiceAccount", metadata: { name: "prometheus" } })
    const issued = await post("/api/v1/namespaces/monitoring/serviceaccounts/prometheus/token", { apiVersion: "authentication.k8s.io/v1", kind: "TokenRequest", spec: { expirationSeconds: 3600 } })
    const token = String((issued["status"] as Record<string, unknown>)["token"])
    expect((await get(metricsPort, "/metrics", token)).status).toBe(403)
    await post("/apis/rbac.authorization.k8s.io/v1/clusterrolebindings", {
      apiVersion: "rbac.authorization.k8s.io/v1",
      kind: "ClusterRoleBinding",
      metadata: { name: "prometheus-monitoring" },
      roleRef: { apiGroup: "rbac.authorization.k8s.io", kind: "ClusterRole", name: "system:monitoring" },
      subjects: [{ kind: "ServiceAccount", name: "prometheus", namespace: "monitoring" }]
    })
    const scraped = await eventually(async () => {
      const r = await get(metricsPort, "/metrics", token)
      return r.status === 200 ? r : undefined
    }, 10_000, "the grant to take effect")
    expect(scraped.type).toBe("text/plain; version=0.0.4; charset=utf-8")
    expect(scraped.text).toMatch(/^# HELP apiserver_request_total /m)
    expect(scraped.text).toMatch(/^process_resident_memory_bytes \d+/m)
    expect(scraped.text).toMatch(/^fleet_store_commit_batch_size_count \d+/m)
    expect(scraped.text).toMatch(/^leader_election_master_status\{name="fleet-controller-manager"\} 1/m)
    await writeFile(join(dir, "token"), token, { mode: 0o600 })
  })

  it("a real Prometheus scrapes it with credentials_file and answers queries for the series", async () => {
    const port = await freePort()
    await writeFile(
      join(dir, "prometheus.yml"),
      [
        "global:",
        "  scrape_interval: 1s",
        "  scrape_timeout: 1s",
        "scrape_configs:",
        "  - job_name: fleet",
        "    authorization:",
        "      type: Bearer",
        `      credentials_file: ${join(dir, "token")}`,
        "    static_configs:",
        `      - targets: ["127.0.0.1:${metricsPort}"]`,
        ""
      ].join("\n")
    )
    prometheus = spawn(
      "prometheus",
      [`--config.file=${join(dir, "prometheus.yml")}`, `--storage.tsdb.path=${join(dir, "tsdb")}`, `--web.listen-address=127.0.0.1:${port}`, "--log.level=warn"],
      { stdio: ["ignore", "pipe", "pipe"] }
    )
    prometheus.stdout?.on("data", (d: Buffer) => (prometheusLog += d.toString()))
    prometheus.stderr?.on("data", (d: Buffer) => (prometheusLog += d.toString()))
    // Traffic for the API series while Prometheus starts.
    for (let i = 0; i < 5; i++) expect((await http.send("GET", "/api/v1/namespaces", { token: admin })).status).toBe(200)

    const query = async (promql: string) => {
      const r = await get(port, `/api/v1/query?query=${encodeURIComponent(promql)}`).catch(() => undefined)
      if (r === undefined || r.status !== 200) return undefined
      const body = JSON.parse(r.text) as { status: string; data: { result: Array<{ metric: Record<string, string>; value: [number, string] }> } }
      return body.status === "success" && body.data.result.length > 0 ? body.data.result : undefined
    }
    const up = await eventually(() => query('up{job="fleet"} == 1'), 20_000, `a successful scrape (prometheus log: ${prometheusLog})`)
    expect(up[0]!.metric["instance"]).toBe(`127.0.0.1:${metricsPort}`)
    const requests = await eventually(() => query('apiserver_request_total{verb="LIST",resource="namespaces",code="200"}'), 10_000, "the API request series")
    expect(Number(requests[0]!.value[1])).toBeGreaterThanOrEqual(5)
    const queues = await eventually(() => query("workqueue_adds_total"), 10_000, "a work-queue series")
    expect(queues.map((r) => r.metric["name"])).toContain("namespace")
    const latency = await eventually(() => query('apiserver_request_duration_seconds_count{verb="LIST",resource="namespaces"}'), 10_000, "the latency histogram")
    expect(Number(latency[0]!.value[1])).toBeGreaterThanOrEqual(5)
  })
})
