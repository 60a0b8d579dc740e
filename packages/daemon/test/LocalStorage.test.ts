/**
 * Persistent volumes on `koder-fleet server` + a separately joined agent, as a k3s user meets
 * them: the `local-path` StorageClass is there and default; a StatefulSet's volumeClaimTemplates
 * become claims that bind once its pod is scheduled (a directory under the agent's data dir,
 * given to the pod's fsGroup); what replica 0 wrote survives its pod's deletion; a claim grows;
 * deleting the claim (reclaim Delete) removes the volume and its directory.
 */
import { execFile } from "node:child_process"
import { existsSync, readFileSync, statSync } from "node:fs"
import { mkdtemp, rm } from "node:fs/promises"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { promisify } from "node:util"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { client, credentials, eventually, spawnRole, start, type FleetProcess, type RoleProcess } from "./fixtures/FleetProcess.js"

const run = promisify(execFile)
const kubectlPath = process.env["KUBECTL"] ?? "/usr/bin/kubectl"

const statefulSet = `
apiVersion: apps/v1
kind: StatefulSet
metadata: { name: web }
spec:
  serviceName: web
  replicas: 1
  selector: { matchLabels: { app: web } }
  template:
    metadata: { labels: { app: web } }
    spec:
      securityContext: { runAsUser: 1000, fsGroup: 2000 }
      containers:
        - name: app
          image: busybox
          command: ["sh", "-c", "test -f /data/first || date +%s%N > /data/first; echo $HOSTNAME >> /data/starts; exec sleep 3600"]
          volumeMounts: [{ name: data, mountPath: /data }]
  volumeClaimTemplates:
    - metadata: { name: data }
      spec:
        accessModes: [ReadWriteOnce]
        resources: { requests: { storage: 1Gi } }
`

describe("local-path volumes on server + agent (root)", () => {
  let dir: string
  let api: FleetProcess
  let box: RoleProcess
  let agent: RoleProcess
  let http: ReturnType<typeof client>
  let token: string

  const send = async (method: string, path: string, body?: unknown, contentType?: string) => {
    const r = await http.send(method, path, { token, ...(body === undefined ? {} : { body: JSON.stringify(body) }), ...(contentType === undefined ? {} : { headers: { "content-type": contentType } }) })
    return { status: r.status, json: () => r.json() as Record<string, any> }
  }
  const kubectl = (...args: ReadonlyArray<string>) => run(kubectlPath, ["--kubeconfig", api.kubeconfig, ...args])
  const claim = async () => (await send("GET", "/api/v1/namespaces/default/persistentvolumeclaims/data-web-0")).json()
  const runningPod = async (notUid?: string) => {
    const p = (await send("GET", "/api/v1/namespaces/default/pods/web-0")).json()
    return p["status"]?.phase === "Running" && p["metadata"]["uid"] !== notUid ? p : undefined
  }

  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), "fleet-storage-"))
    api = await start(["--data-dir", join(dir, "server"), "--listen", "127.0.0.1:0"])
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
    http?.close()
    for (const p of [agent?.child, box?.child, api?.child]) if (p !== undefined && p.exitCode === null) p.kill("SIGKILL")
    if (dir) await rm(dir, { recursive: true, force: true })
  })

  it("binds a StatefulSet's claim on the pod's node, keeps its data across the pod's deletion, grows it, and deletes it with the claim", async () => {
    const classes = await eventually(async () => {
      const out = (await kubectl("get", "storageclass", "--no-headers")).stdout
      return out.includes("local-path") ? out : undefined
    }, 30_000, "the local-path StorageClass")
    expect(classes).toMatch(/^local-path \(default\)\s+fleet\.koder\.dev\/local-path\s+Delete\s+WaitForFirstConsumer\s+true/m)

    await run("sh", ["-c", `printf '%s' "$0" | ${kubectlPath} --kubeconfig ${api.kubeconfig} apply -f -`, statefulSet])
    const first = await eventually(() => runningPod(), 90_000, "web-0 Running").catch(async (e: Error) => {
      const described = await kubectl("describe", "pvc", "data-web-0").then((r) => r.stdout, (r: { stderr?: string }) => r.stderr ?? "")
      throw new Error(`${e.message}\n${described}\nagent: ${agent.stderr().slice(-2000)}`)
    })
    const bound = await claim()
    expect(bound["spec"]["storageClassName"]).toBe("local-path")
    expect(bound["status"]["phase"]).toBe("Bound")
    expect(bound["metadata"]["annotations"]["volume.kubernetes.io/selected-node"]).toBe("worker")
    const pvName = bound["spec"]["volumeName"] as string
    expect(pvName).toBe(`pvc-${bound["metadata"]["uid"]}`)
    const pv = (await send("GET", `/api/v1/persistentvolumes/${pvName}`)).json()
    expect(pv["status"]["phase"]).toBe("Bound")
    expect(pv["spec"]["persistentVolumeReclaimPolicy"]).toBe("Delete")
    expect(pv["spec"]["nodeAffinity"]["required"]["nodeSelectorTerms"][0]["matchFields"][0]["values"]).toEqual(["worker"])
    const path = pv["spec"]["hostPath"]["path"] as string
    expect(path).toBe(join(dir, "agent", "storage", `${pvName}_default_data-web-0`))

    // What the pod wrote is in the node's directory, group-owned by its fsGroup (setgid).
    const written = await eventually(() => (existsSync(join(path, "first")) ? readFileSync(join(path, "first"), "utf8") : undefined), 30_000, "the pod's file")
    expect(statSync(path).gid).toBe(2000)
    expect(statSync(path).mode & 0o2000).toBe(0o2000)
    expect(statSync(join(path, "first")).uid).toBe(1000)
    expect((await kubectl("get", "pvc", "data-web-0", "--no-headers")).stdout).toMatch(new RegExp(`^data-web-0\\s+Bound\\s+${pvName}\\s+1Gi\\s+RWO\\s+local-path`))

    // A new pod for replica 0 gets the same claim, and sees the first one's data.
    expect((await send("DELETE", "/api/v1/namespaces/default/pods/web-0")).status).toBe(200)
    await eventually(() => runningPod(first["metadata"]["uid"]), 90_000, "a new web-0 Running")
    await eventually(() => (readFileSync(join(path, "starts"), "utf8").trim().split("\n").length === 2 ? true : undefined), 30_000, "the second start recorded")
    expect(readFileSync(join(path, "first"), "utf8")).toBe(written)

    // The class allows expansion: the claim grows, and the volume with it.
    const grown = await send("PATCH", "/api/v1/namespaces/default/persistentvolumeclaims/data-web-0", { spec: { resources: { requests: { storage: "2Gi" } } } }, "application/merge-patch+json")
    expect(grown.status).toBe(200)
    await eventually(async () => ((await claim())["status"]?.capacity?.storage === "2Gi" ? true : undefined), 30_000, "the claim's capacity 2Gi")
    expect((await send("GET", `/api/v1/persistentvolumes/${pvName}`)).json()["spec"]["capacity"]["storage"]).toBe("2Gi")

    // The StatefulSet goes, its claim stays (Kubernetes' default retention); deleting the claim deletes the volume and its directory.
    await kubectl("delete", "statefulset", "web", "--wait=true")
    await eventually(async () => ((await send("GET", "/api/v1/namespaces/default/pods/web-0")).status === 404 ? true : undefined), 60_000, "web-0 gone")
    expect(existsSync(path)).toBe(true)
    expect((await send("DELETE", "/api/v1/namespaces/default/persistentvolumeclaims/data-web-0")).status).toBe(200)
    await eventually(async () => ((await send("GET", `/api/v1/persistentvolumes/${pvName}`)).status === 404 ? true : undefined), 60_000, "the volume deleted")
    expect(existsSync(path)).toBe(false)
  }, 300_000)
})
