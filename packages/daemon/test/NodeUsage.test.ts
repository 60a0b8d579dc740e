/**
 * Usage from an agent in its own process: `koder-fleet server` scrapes the joined agent's usage
 * (as metrics-server scrapes kubelets), so `metrics.k8s.io`, `kubectl top` and the HPA work on a
 * server + agent cluster, not only in `dev`; `pods/processmetrics` reads a pod's processes from its
 * node. A CPU-burning Deployment is scaled up by its HPA, and
 * back down once its pods go idle.
 */
import { execFile } from "node:child_process"
import { mkdtemp, rm } from "node:fs/promises"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { promisify } from "node:util"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { client, credentials, eventually, spawnRole, start, type FleetProcess, type RoleProcess } from "./fixtures/FleetProcess.js"

const run = promisify(execFile)
const kubectlPath = process.env["KUBECTL"] ?? "/usr/bin/kubectl"

describe("usage of a joined agent's pods", () => {
  let dir: string
  let api: FleetProcess
  let box: RoleProcess
  let agent: RoleProcess
  let http: ReturnType<typeof client>
  let token: string

  const send = async (method: string, path: string, body?: unknown, contentType?: string) => {
    const r = await http.send(method, path, { token, ...(body === undefined ? {} : { body: JSON.stringify(body) }), ...(contentType === undefined ? {} : { headers: { "content-type": contentType } }) })
    return { status: r.status, json: () => r.json() as Record<string, any>, text: r.text }
  }
  const replicas = async () => (await send("GET", "/apis/apps/v1/namespaces/default/deployments/burner")).json()["spec"]["replicas"] as number

  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), "fleet-usage-"))
    api = await start(["--data-dir", join(dir, "server"), "--listen", "127.0.0.1:0", "--usage-interval", "2s"])
    const m = /--join-token (\S+) --ca-hash (\S+)/.exec(api.stdout())
    if (m === null) throw new Error(`no join line in:\n${api.stdout()}`)
    const creds = credentials(api.kubeconfig)
    token = creds.token
    http = client(api.port, creds.ca)
    box = spawnRole("box", ["--data-dir", join(dir, "box"), "--socket", join(dir, "box.sock")])
    agent = spawnRole("agent", ["--server", `https://127.0.0.1:${api.port}`, "--box-socket", join(dir, "box.sock"), "--data-dir", join(dir, "agent"), "--node-name", "worker", "--internal-ip", "127.0.0.1", "--port", "0", "--join-token", m[1]!, "--ca-hash", m[2]!])
    await eventually(
      async () => {
        if (agent.child.exitCode !== null) throw new Error(`agent exited: ${agent.stderr()}`)
        const n = (await send("GET", "/api/v1/nodes/worker")).json()
        return (n["status"]?.conditions ?? []).some((c: any) => c.type === "Ready" && c.status === "True") ? true : undefined
      },
      60_000,
      "node worker Ready"
    )
  }, 120_000)

  afterAll(async () => {
    await send("DELETE", "/apis/apps/v1/namespaces/default/deployments/burner").catch(() => undefined)
    http?.close()
    for (const p of [agent?.child, box?.child, api?.child]) if (p !== undefined && p.exitCode === null) p.kill("SIGKILL")
    if (dir) await rm(dir, { recursive: true, force: true })
  })

  it("kubectl top shows the pods' usage, and an HPA scales a CPU burner up, then down when it idles", async () => {
    const template = (command: ReadonlyArray<string>) => ({
      metadata: { labels: { app: "burner" } },
      spec: { containers: [{ name: "burn", image: "busybox", command, resources: { requests: { cpu: "100m" } } }] }
    })
    const created = await send("POST", "/apis/apps/v1/namespaces/default/deployments", {
      apiVersion: "apps/v1",
      kind: "Deployment",
      metadata: { name: "burner" },
      spec: { replicas: 1, selector: { matchLabels: { app: "burner" } }, template: template(["sh", "-c", "while :; do :; done"]) }
    })
    expect(created.status).toBe(201)
    const usage = await eventually(
      async () => {
        const items = ((await send("GET", "/apis/metrics.k8s.io/v1beta1/namespaces/default/pods")).json()["items"] ?? []) as Array<Record<string, any>>
        return items.find((p) => String(p["metadata"]["name"]).startsWith("burner-"))
      },
      60_000,
      "the burner's usage in metrics.k8s.io"
    ).catch((e) => {
      throw new Error(`${e.message}\nagent: ${agent.stderr().slice(-1500)}`)
    })
    expect(usage["containers"][0]["name"]).toBe("burn")
    // What runs in the pod, read from its node through the agent: the burning shell.
    const pm = await send("GET", `/api/v1/namespaces/default/pods/${usage["metadata"]["name"]}/processmetrics`)
    expect(pm.status).toBe(200)
    const burn = pm.json()["containers"][0]
    expect(pm.json()["kind"]).toBe("PodProcessMetrics")
    expect(burn["name"]).toBe("burn")
    expect(burn["processes"]).toBeGreaterThanOrEqual(1)
    expect(burn["threads"]).toBeGreaterThanOrEqual(burn["processes"])
    expect(burn["byCommand"].map((c: any) => c.command)).toContain("sh")
    expect(burn["byState"]["R"]).toBeGreaterThanOrEqual(1)
    expect(burn["rssBytes"]).toBeGreaterThan(0)
    expect((await send("GET", `/api/v1/namespaces/default/pods/${usage["metadata"]["name"]}/processmetrics?container=nope`)).status).toBe(400)
    const top = await run(kubectlPath, ["--kubeconfig", api.kubeconfig, "top", "pods", "--no-headers"])
    // Name, CPU in millicores (a busy loop: hundreds), memory.
    expect(top.stdout).toMatch(/^burner-\S+\s+\d{2,}m\s+\d+Mi/m)
    expect((await run(kubectlPath, ["--kubeconfig", api.kubeconfig, "top", "nodes", "--no-headers"])).stdout).toMatch(/^worker\s+\d+m\s+\d+%/m)

    const hpa = await send("POST", "/apis/autoscaling/v2/namespaces/default/horizontalpodautoscalers", {
      apiVersion: "autoscaling/v2",
      kind: "HorizontalPodAutoscaler",
      metadata: { name: "burner" },
      spec: {
        scaleTargetRef: { apiVersion: "apps/v1", kind: "Deployment", name: "burner" },
        minReplicas: 1,
        maxReplicas: 2,
        metrics: [{ type: "Resource", resource: { name: "cpu", target: { type: "Utilization", averageUtilization: 50 } } }],
        behavior: { scaleDown: { stabilizationWindowSeconds: 0 } }
      }
    })
    expect(hpa.status).toBe(201)
    await eventually(async () => ((await replicas()) === 2 ? true : undefined), 90_000, "the HPA to scale burner to 2")
    // The pods stop burning (a new template): utilization falls and the HPA scales back to 1.
    const patched = await send("PATCH", "/apis/apps/v1/namespaces/default/deployments/burner", { spec: { template: template(["sleep", "3600"]) } }, "application/strategic-merge-patch+json")
    expect(patched.status).toBe(200)
    await eventually(async () => ((await replicas()) === 1 ? true : undefined), 120_000, "the HPA to scale burner back to 1")
    // Its status settles on the idle pods' utilization.
    await eventually(async () => {
      const status = (await send("GET", "/apis/autoscaling/v2/namespaces/default/horizontalpodautoscalers/burner")).json()["status"]
      return status?.["currentMetrics"]?.[0]?.["resource"]?.["current"]?.["averageUtilization"] < 50 ? true : undefined
    }, 60_000, "the HPA's status to show the idle utilization")
    expect(await replicas()).toBe(1)
  }, 300_000)
})
