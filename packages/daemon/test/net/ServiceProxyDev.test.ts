/**
 * NodePort and LoadBalancer Services end to end in `koder-fleet dev`: three replicas of a small
 * Node.js server (each answers its pod name) behind a NodePort; the in-process agent's proxy
 * spreads 300 connections evenly, keeps answering every request while one replica's process is
 * killed, keeps an established connection across an endpoint change, and a LoadBalancer Service
 * answers on the address the controller gave it from --lb-pool.
 */
import { readdirSync, readFileSync } from "node:fs"
import { mkdtemp, rm } from "node:fs/promises"
import { Agent, request } from "node:http"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { client, credentials, eventually, start, type FleetProcess } from "../fixtures/FleetProcess.js"

type Json = Record<string, any>

const get = (host: string, port: number, agent?: Agent) =>
  new Promise<{ status: number; text: string; reused: boolean }>((resolve, reject) => {
    const req = request({ host, port, path: "/", agent: agent ?? false }, (res) => {
      let text = ""
      res.on("data", (d: Buffer) => (text += d.toString()))
      res.on("end", () => resolve({ status: res.statusCode ?? 0, text, reused: req.reusedSocket }))
    })
    req.on("error", reject)
    req.end()
  })

/** The host pid of the node process serving `port` (its environment carries PORT=port). */
const hostPidOf = (port: number): number | undefined => {
  const wanted = `PORT=${port}\0`
  for (const entry of readdirSync("/proc")) {
    if (!/^\d+$/.test(entry)) continue
    try {
      const env = readFileSync(`/proc/${entry}/environ`, "latin1")
      if ((env.startsWith(wanted) || env.includes(`\0${wanted}`)) && readFileSync(`/proc/${entry}/cmdline`, "latin1").startsWith("node\0")) return Number(entry)
    } catch {
      // gone meanwhile
    }
  }
  return undefined
}

const app = `
require("node:http").createServer((req, res) => res.end(process.env.HOSTNAME)).listen(Number(process.env.PORT))
`

// A loopback address of its own per run, so parallel dev clusters do not collide on it.
const lbIP = `127.0.${Math.floor(Math.random() * 200) + 20}.${Math.floor(Math.random() * 200) + 20}`

describe("NodePort and LoadBalancer Services in koder-fleet dev", () => {
  let dir: string
  let dev: FleetProcess
  let http: ReturnType<typeof client>
  let token: string
  const api = async (method: string, path: string, body?: unknown) => {
    const r = await http.send(method, path, { token, ...(body === undefined ? {} : { body: JSON.stringify(body) }) })
    return { status: r.status, json: () => r.json() as Json }
  }
  const readyEndpoints = async (service: string) => {
    const slices = (await api("GET", `/apis/discovery.k8s.io/v1/namespaces/default/endpointslices?labelSelector=kubernetes.io%2Fservice-name%3D${service}`)).json()["items"] as Array<Json>
    return slices.flatMap((s) => (s["endpoints"] ?? []).filter((e: Json) => e["conditions"]?.["ready"] === true))
  }
  const pods = async () =>
    ((await api("GET", "/api/v1/namespaces/default/pods?labelSelector=app%3Dwho")).json()["items"] as Array<Json>).filter((p) => p["metadata"]["deletionTimestamp"] === undefined)

  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), "fleet-nodeport-"))
    dev = await start(
      ["--listen", "127.0.0.1:0", "--node-name", "proxynode", "--dns-listen", "off", "--ingress-listen", "off", "--ingress-tls-listen", "off", "--nodeport-address", "127.0.0.1", "--lb-pool", lbIP],
      "dev",
      { FLEET_DATA_DIR: dir }
    )
    const creds = credentials(dev.kubeconfig)
    token = creds.token
    http = client(dev.port, creds.ca)
  }, 60_000)

  afterAll(async () => {
    http?.close()
    if (dev !== undefined && dev.child.exitCode === null) {
      dev.child.kill("SIGINT")
      await Promise.race([dev.exited, new Promise((r) => setTimeout(r, 15_000))])
      if (dev.child.exitCode === null) dev.child.kill("SIGKILL")
    }
    if (dir !== undefined) await rm(dir, { recursive: true, force: true })
  })

  let nodePort = 0

  it("spreads 300 connections across 3 replicas behind a NodePort", async () => {
    const deployment = {
      apiVersion: "apps/v1",
      kind: "Deployment",
      metadata: { name: "who" },
      spec: {
        replicas: 3,
        selector: { matchLabels: { app: "who" } },
        template: {
          metadata: { labels: { app: "who" } },
          spec: {
            terminationGracePeriodSeconds: 1,
            containers: [{ name: "app", image: "node:20", command: ["node", "-e", app], ports: [{ name: "http", containerPort: 8080 }], readinessProbe: { tcpSocket: { port: "http" }, periodSeconds: 1 } }]
          }
        }
      }
    }
    expect((await api("POST", "/apis/apps/v1/namespaces/default/deployments", deployment)).status).toBe(201)
    const created = await api("POST", "/api/v1/namespaces/default/services", { apiVersion: "v1", kind: "Service", metadata: { name: "who" }, spec: { type: "NodePort", selector: { app: "who" }, ports: [{ name: "http", port: 80, targetPort: "http" }] } })
    expect(created.status).toBe(201)
    nodePort = created.json()["spec"]["ports"][0]["nodePort"]
    expect(nodePort).toBeGreaterThanOrEqual(30000)
    expect(nodePort).toBeLessThanOrEqual(32767)
    await eventually(async () => ((await readyEndpoints("who")).length === 3 ? true : undefined), 60_000, "3 ready endpoints")
    const names = new Set((await pods()).map((p) => p["metadata"]["name"] as string))
    await eventually(async () => ((await get("127.0.0.1", nodePort).catch(() => undefined))?.status === 200 ? true : undefined), 20_000, "the node port to answer")

    const counts = new Map<string, number>()
    for (let i = 0; i < 300; i++) {
      const r = await get("127.0.0.1", nodePort)
      expect(r.status).toBe(200)
      counts.set(r.text, (counts.get(r.text) ?? 0) + 1)
    }
    expect(new Set(counts.keys())).toEqual(names)
    for (const n of counts.values()) expect(n).toBeGreaterThanOrEqual(80)
  }, 120_000)

  it("answers every request while one replica's process is killed", async () => {
    const victim = (await pods())[0]!
    const port = victim["status"]["hostPorts"][0]["hostPort"] as number
    const pid = hostPidOf(port)
    expect(pid, "the victim's process").toBeDefined()
    process.kill(pid!, "SIGKILL")
    // A connection accepted in the instant before the kernel closes the dead process's socket is
    // reset after it was established, which no layer-4 proxy can hide: the claim is about after
    // the process is dead, with every thread of it (node has several: a zombie leader's sockets
    // stay open until its last thread has exited) a zombie or reaped.
    const dead = () => {
      try {
        for (const tid of readdirSync(`/proc/${pid}/task`)) {
          const stat = readFileSync(`/proc/${pid}/task/${tid}/stat`, "utf8")
          if (stat.slice(stat.lastIndexOf(")") + 2, stat.lastIndexOf(")") + 3) !== "Z") return undefined
        }
        return true
      } catch {
        return true
      }
    }
    await eventually(dead, 10_000, "the killed replica's process to die")
    const answers: Array<string> = []
    for (let i = 0; i < 100; i++) {
      const r = await get("127.0.0.1", nodePort)
      expect(r.status).toBe(200)
      answers.push(r.text)
    }
    // The survivors carried the load while the victim was down.
    expect(new Set(answers).size).toBeGreaterThanOrEqual(2)
  }, 60_000)

  it("keeps an established connection across an endpoint change", async () => {
    const agent = new Agent({ keepAlive: true, maxSockets: 1 })
    const first = await get("127.0.0.1", nodePort, agent)
    expect(first.status).toBe(200)
    const scaled = await http.send("PATCH", "/apis/apps/v1/namespaces/default/deployments/who", { token, body: JSON.stringify({ spec: { replicas: 4 } }), headers: { "content-type": "application/merge-patch+json" } })
    expect(scaled.status).toBe(200)
    await eventually(async () => ((await readyEndpoints("who")).length === 4 ? true : undefined), 60_000, "4 ready endpoints")
    const second = await get("127.0.0.1", nodePort, agent)
    expect(second.status).toBe(200)
    expect(second.reused).toBe(true)
    expect(second.text).toBe(first.text)
    agent.destroy()
  }, 90_000)

  it("gives a LoadBalancer Service an address from the pool and answers on it", async () => {
    const created = await api("POST", "/api/v1/namespaces/default/services", { apiVersion: "v1", kind: "Service", metadata: { name: "who-lb" }, spec: { type: "LoadBalancer", selector: { app: "who" }, ports: [{ name: "http", port: 18080, targetPort: "http" }] } })
    expect(created.status).toBe(201)
    const ip = await eventually(async () => (await api("GET", "/api/v1/namespaces/default/services/who-lb")).json()["status"]?.["loadBalancer"]?.["ingress"]?.[0]?.["ip"] as string | undefined, 20_000, "an address in status")
    expect(ip).toBe(lbIP)
    const r = await eventually(async () => get(ip, 18080).catch(() => undefined), 20_000, "the load-balancer address to answer")
    expect(r.status).toBe(200)
    expect(r.text).toMatch(/^who-/)
  }, 60_000)
})
