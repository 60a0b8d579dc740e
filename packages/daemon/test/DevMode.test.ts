/**
 * `koder-fleet dev` end to end: one process with the API, the controllers, the scheduler, the box
 * and the agent, running real workloads as host processes.
 *
 * A 3-replica Deployment of a small Node.js server becomes three Ready pods, each answering HTTP on
 * the host port the agent gave it; a process killed from outside is restarted (restartCount 1); a
 * failing readiness probe takes the pod out of the Service's endpoints and a failing liveness
 * probe restarts it; logs follow live output; exec needs a ProcessControl consent and then returns
 * output and exit code; an HPA scales a CPU-burning Deployment up from the usage the box measures;
 * deleting the Deployments leaves no process; Ctrl-C (SIGINT) ends the cluster and every workload.
 */
import { existsSync, readdirSync, readFileSync } from "node:fs"
import { mkdtemp, rm } from "node:fs/promises"
import { request } from "node:http"
import { request as httpsRequest } from "node:https"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { client, credentials, eventually, start, type FleetProcess } from "./fixtures/FleetProcess.js"

type Json = Record<string, any>

const get = (port: number, path: string) =>
  new Promise<{ status: number; text: string }>((resolve, reject) => {
    const req = request({ host: "127.0.0.1", port, path }, (res) => {
      let text = ""
      res.on("data", (d: Buffer) => (text += d.toString()))
      res.on("end", () => resolve({ status: res.statusCode ?? 0, text }))
    })
    req.on("error", reject)
    req.end()
  })

/**
 * The host pid of the process listening for `port` (its environment carries PORT=port). Pods run
 * in pid namespaces of their own when the box runs as root, so the process's own pid is not it.
 */
const hostPidOf = (port: number): number | undefined => {
  const wanted = `PORT=${port}\0`
  for (const entry of readdirSync("/proc")) {
    if (!/^\d+$/.test(entry)) continue
    try {
      const env = readFileSync(`/proc/${entry}/environ`, "latin1")
      if ((env.startsWith(wanted) || env.includes(`\0${wanted}`)) && readFileSync(`/proc/${entry}/cmdline`, "latin1").startsWith("node\0")) return Number(entry)
    } catch {
      // gone meanwhile, or not ours to read
    }
  }
  return undefined
}

// / answers the process id (in its pid namespace); /sick makes readiness fail; /hang makes liveness fail.
const app = `
const http = require("node:http")
let ready = true, live = true
http.createServer((req, res) => {
  if (req.url === "/ready") { res.statusCode = ready ? 200 : 503; return res.end() }
  if (req.url === "/live") { res.statusCode = live ? 200 : 500; return res.end() }
  if (req.url === "/sick") { ready = false; return res.end("sick") }
  if (req.url === "/hang") { live = false; return res.end("hanging") }
  console.log("served " + req.url)
  res.end(String(process.pid))
}).listen(Number(process.env.PORT), () => console.log("listening on " + process.env.PORT))
`

const deployment = (name: string, replicas: number, container: Json): Json => ({
  apiVersion: "apps/v1",
  kind: "Deployment",
  metadata: { name },
  spec: {
    replicas,
    selector: { matchLabels: { app: name } },
    template: { metadata: { labels: { app: name } }, spec: { terminationGracePeriodSeconds: 2, containers: [{ name: "app", image: "node:20", ...container }] } }
  }
})

describe("koder-fleet dev", () => {
  let dir: string
  let dev: FleetProcess
  let http: ReturnType<typeof client>
  let token: string
  let ca: string
  const pids = new Set<number>()

  const api = async (method: string, path: string, body?: unknown) => {
    const r = await http.send(method, path, { token, ...(body === undefined ? {} : { body: JSON.stringify(body) }) })
    return { status: r.status, json: () => r.json() as Json, text: r.text }
  }
  const pods = async (app: string) =>
    ((await api("GET", `/api/v1/namespaces/default/pods?labelSelector=app%3D${app}`)).json()["items"] as Array<Json>).filter((p) => p["metadata"]["deletionTimestamp"] === undefined)
  const isReady = (p: Json) => (p["status"]?.["conditions"] ?? []).some((c: Json) => c["type"] === "Ready" && c["status"] === "True")
  const hostPort = (p: Json) => p["status"]["hostPorts"][0]["hostPort"] as number
  const readyPods = (app: string, n: number) =>
    eventually(
      async () => {
        const ps = await pods(app)
        return ps.length === n && ps.every(isReady) ? ps : undefined
      },
      60_000,
      `${n} ready ${app} pods`
    )

  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), "fleet-dev-"))
    dev = await start(["--listen", "127.0.0.1:0", "--usage-interval", "1s", "--node-name", "devnode"], "dev", { FLEET_DATA_DIR: dir })
    const creds = credentials(dev.kubeconfig)
    token = creds.token
    ca = creds.ca
    http = client(dev.port, creds.ca)
  }, 60_000)

  afterAll(async () => {
    http?.close()
    if (dev?.child.exitCode === null) dev.child.kill("SIGKILL")
    for (const pid of pids) {
      try {
        process.kill(pid, "SIGKILL")
      } catch {
        // already gone, as it should be
      }
    }
    await rm(dir, { recursive: true, force: true })
  })

  it("is ready within 3 s of starting and prints how to reach it", () => {
    const m = /ready in (\d+) ms/.exec(dev.stdout())
    expect(m).not.toBeNull()
    expect(Number(m![1])).toBeLessThan(3000)
    expect(dev.stdout()).toContain(`export KUBECONFIG=${join(dir, "kubeconfig")}`)
  })

  it("keeps its node alive with a heartbeat Lease in kube-node-lease", async () => {
    // Without the Lease the node lifecycle controller takes the node for lost 40 s after each
    // status report, and every pod on it flaps to not Ready.
    const lease = await eventually(async () => {
      const r = await api("GET", "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/devnode")
      return r.status === 200 ? r.json() : undefined
    }, 30_000, "the node's Lease")
    expect(lease["spec"]["holderIdentity"]).toBe("devnode")
  })

  it("runs a 3-replica Deployment whose pods answer HTTP on their ports and sit behind the Service", async () => {
    const probe = (path: string, period = 1) => ({ httpGet: { path, port: "http" }, periodSeconds: period, failureThreshold: 2 })
    expect((await api("POST", "/apis/apps/v1/namespaces/default/deployments", deployment("web", 3, { command: ["node", "-e", app], ports: [{ name: "http", containerPort: 8080 }], readinessProbe: probe("/ready"), livenessProbe: probe("/live") }))).status).toBe(201)
    expect((await api("POST", "/api/v1/namespaces/default/services", { apiVersion: "v1", kind: "Service", metadata: { name: "web" }, spec: { selector: { app: "web" }, ports: [{ port: 80, targetPort: "http" }] } })).status).toBe(201)
    const ready = await readyPods("web", 3)
    const ports = ready.map(hostPort)
    expect(new Set(ports).size).toBe(3)
    for (const port of ports) {
      const r = await get(port, "/")
      expect(r.status).toBe(200)
      const pid = hostPidOf(port)
      expect(pid, `the process behind port ${port}`).toBeDefined()
      pids.add(pid!)
    }
    expect(pids.size).toBe(3)
    await eventually(async () => {
      const ep = (await api("GET", "/api/v1/namespaces/default/endpoints/web")).json()
      const got = (ep["subsets"] ?? []).flatMap((s: Json) => (s["ports"] ?? []).map((p: Json) => p["port"]) as Array<number>)
      return got.length === 3 && ports.every((p) => got.includes(p)) ? true : undefined
    }, 30_000, "the endpoints to carry the three host ports")
  }, 90_000)

  it("restarts a process killed from outside (restartCount 1)", async () => {
    const [victim] = await readyPods("web", 3)
    const port = hostPort(victim!)
    const pid = hostPidOf(port)!
    process.kill(pid, "SIGKILL")
    const restarted = await eventually(async () => {
      const p = (await api("GET", `/api/v1/namespaces/default/pods/${victim!["metadata"]["name"]}`)).json()
      const s = p["status"]?.["containerStatuses"]?.[0]
      return s?.restartCount === 1 && s?.ready === true ? p : undefined
    }, 60_000, "the killed container to be restarted and ready")
    expect((await get(hostPort(restarted), "/")).status).toBe(200)
    const after = hostPidOf(hostPort(restarted))!
    expect(after).not.toBe(pid)
    pids.add(after)
  }, 90_000)

  it("drops a pod failing readiness from the endpoints, and restarts one failing liveness", async () => {
    const [a, b] = (await readyPods("web", 3)).sort((x, y) => String(x["metadata"]["name"]).localeCompare(String(y["metadata"]["name"])))
    await get(hostPort(a!), "/sick")
    await eventually(async () => {
      const ep = (await api("GET", "/api/v1/namespaces/default/endpoints/web")).json()
      const ready = (ep["subsets"] ?? []).flatMap((s: Json) => (s["addresses"] ?? []).map((x: Json) => x["targetRef"]?.["name"]))
      const notReady = (ep["subsets"] ?? []).flatMap((s: Json) => (s["notReadyAddresses"] ?? []).map((x: Json) => x["targetRef"]?.["name"]))
      return !ready.includes(a!["metadata"]["name"]) && notReady.includes(a!["metadata"]["name"]) ? true : undefined
    }, 30_000, "the sick pod to leave the ready endpoints")

    const before = b!["status"]["containerStatuses"][0]["restartCount"] as number
    await get(hostPort(b!), "/hang")
    await eventually(async () => {
      const p = (await api("GET", `/api/v1/namespaces/default/pods/${b!["metadata"]["name"]}`)).json()
      return p["status"]["containerStatuses"][0]["restartCount"] > before ? true : undefined
    }, 60_000, "the liveness failure to restart the container")
  }, 120_000)

  it("streams logs as they are written", async () => {
    // One pod was made unready on purpose above: any ready one will do.
    const p = await eventually(async () => (await pods("web")).find(isReady), 30_000, "a ready web pod")
    const name = p!["metadata"]["name"] as string
    const seen = await new Promise<string>((resolve, reject) => {
      let text = ""
      const req = httpsRequest(
        { host: "127.0.0.1", port: dev.port, path: `/api/v1/namespaces/default/pods/${name}/log?follow=true&tailLines=0`, headers: { authorization: `Bearer ${token}` }, ca, servername: "localhost" },
        (res) => {
          res.setEncoding("utf8")
          res.on("data", (d: string) => {
            text += d
            if (text.includes("served /live-marker")) {
              req.destroy()
              resolve(text)
            }
          })
          // The stream is open: now make the process write, until a line arrives (the node's box
          // may take a moment to subscribe to the output after the API has answered).
          const poke = () => void get(hostPort(p!), "/live-marker")
          poke()
          const again = setInterval(() => (text.includes("served /live-marker") ? clearInterval(again) : poke()), 250)
          res.on("close", () => clearInterval(again))
        }
      )
      req.on("error", (e) => (e.message.includes("socket hang up") ? undefined : reject(e)))
      req.end()
      setTimeout(() => reject(new Error(`no live line within 20 s; got ${JSON.stringify(text)}`)), 20_000)
    })
    expect(seen).toContain("served /live-marker")
  }, 60_000)

  it("refuses exec without a ProcessControl consent, then runs commands with their output and exit code", async () => {
    const [p] = await pods("web")
    const path = `/api/v1/namespaces/default/pods/${p!["metadata"]["name"]}/exec`
    const refused = await api("POST", path, { command: ["sh", "-c", "echo hi"] })
    expect(refused.status).toBe(403)
    expect(refused.json()["message"]).toContain("no ProcessControl")
    expect((await api("POST", "/apis/fleet.koder.dev/v1/namespaces/default/processcontrols", { apiVersion: "fleet.koder.dev/v1", kind: "ProcessControl", metadata: { name: "allow" }, spec: {} })).status).toBe(201)
    const ok = await api("POST", path, { command: ["sh", "-c", "echo $GREETING-$PORT; exit 3"] })
    expect(ok.status).toBe(200)
    expect(ok.json()).toMatchObject({ exitCode: 3, stdout: `-${hostPort(p!)}\n` })
  }, 60_000)

  it("scales a CPU-burning Deployment up with an HPA fed by the box's usage", async () => {
    const burn = "const end = Date.now() + 120000; while (Date.now() < end) {}"
    expect((await api("POST", "/apis/apps/v1/namespaces/default/deployments", deployment("burner", 1, { command: ["node", "-e", burn], resources: { requests: { cpu: "100m" } } }))).status).toBe(201)
    await readyPods("burner", 1)
    const hpa = {
      apiVersion: "autoscaling/v2",
      kind: "HorizontalPodAutoscaler",
      metadata: { name: "burner" },
      spec: {
        scaleTargetRef: { apiVersion: "apps/v1", kind: "Deployment", name: "burner" },
        minReplicas: 1,
        maxReplicas: 2,
        metrics: [{ type: "Resource", resource: { name: "cpu", target: { type: "Utilization", averageUtilization: 50 } } }]
      }
    }
    expect((await api("POST", "/apis/autoscaling/v2/namespaces/default/horizontalpodautoscalers", hpa)).status).toBe(201)
    await eventually(async () => {
      const d = (await api("GET", "/apis/apps/v1/namespaces/default/deployments/burner")).json()
      return d["spec"]["replicas"] === 2 ? true : undefined
    }, 60_000, "the HPA to scale burner to 2")
    for (const p of await pods("burner")) {
      const r = await api("GET", `/apis/metrics.k8s.io/v1beta1/namespaces/default/pods/${p["metadata"]["name"]}`)
      if (r.status === 200) expect(r.json()["containers"][0]["usage"]["cpu"]).toMatch(/n$|m$|^\d+$/)
    }
    expect((await api("DELETE", "/apis/apps/v1/namespaces/default/deployments/burner")).status).toBe(200)
  }, 120_000)

  it("leaves no process behind when the Deployment is deleted", async () => {
    const live = new Set<number>()
    for (const p of await pods("web")) live.add(hostPidOf(hostPort(p))!)
    for (const pid of live) pids.add(pid)
    expect((await api("DELETE", "/apis/apps/v1/namespaces/default/deployments/web")).status).toBe(200)
    await eventually(async () => ((await pods("web")).length === 0 && (await pods("burner")).length === 0 ? true : undefined), 60_000, "the pods to go")
    await eventually(() => ([...live].every((pid) => !existsSync(`/proc/${pid}`)) ? true : undefined), 20_000, "every web process to exit")
  }, 90_000)

  it("stops every workload on Ctrl-C", async () => {
    expect((await api("POST", "/apis/apps/v1/namespaces/default/deployments", deployment("last", 1, { command: ["node", "-e", app], ports: [{ name: "http", containerPort: 8080 }] }))).status).toBe(201)
    const [p] = await eventually(async () => {
      const ps = await pods("last")
      return ps.length === 1 && ps[0]!["status"]?.["phase"] === "Running" ? ps : undefined
    }, 60_000, "the last pod to run")
    const pid = await eventually(async () => {
      try {
        await get(hostPort(p!), "/")
        return hostPidOf(hostPort(p!))
      } catch {
        return undefined
      }
    }, 20_000, "the last pod to answer")
    pids.add(pid)
    // The pods' sandboxes: as root each has a namespaces holder process, which must not outlive dev either.
    const sandboxDir = join(dir, "box", "sandboxes")
    const holders = readdirSync(sandboxDir)
      .filter((f) => f.endsWith(".json"))
      .map((f) => (JSON.parse(readFileSync(join(sandboxDir, f), "utf8")) as { holder?: { pid: number } }).holder?.pid)
      .filter((h): h is number => h !== undefined)
    dev.child.kill("SIGINT")
    expect(await dev.exited).toBe(0)
    // Pods were deleted and others started: descriptor numbers were reused without a warning.
    expect(dev.stderr() + dev.stdout()).not.toContain("unmanaged mode")
    expect(existsSync(`/proc/${pid}`)).toBe(false)
    // A killed holder is gone once `unshare`, its parent, has reaped it and exited too.
    await eventually(async () => (holders.every((h) => !existsSync(`/proc/${h}`)) ? true : undefined), 5_000, "the pods' holders to be gone")
  }, 90_000)
})
