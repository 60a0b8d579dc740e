/**
 * Pods cannot see the node (issue 29 item 1/Build 2), end to end in `koder-fleet dev` as root:
 * a tenant (`fleet:customer` ServiceAccount of its namespace) runs a pod whose program tries what
 * the attacker of the issue did — read the kubeconfig, the encryption key and state.db in the
 * data dir, reach the box's socket and run a command in another tenant's container through it,
 * read that tenant's volume — and prints what it could do. Every attempt fails; the pod runs as a
 * uid that is not root, with no capabilities and no_new_privs. A `runAsNonRoot` pod asking for
 * uid 0 does not start: CreateContainerConfigError with the kubelet's message.
 */
import { existsSync, readdirSync, statSync } from "node:fs"
import { mkdtemp, rm } from "node:fs/promises"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { client, credentials, eventually, start, type FleetProcess } from "../fixtures/FleetProcess.js"

type Json = Record<string, any>

/**
 * The attacker's program (node, as the host has it): each attempt's outcome as one JSON line.
 * argv: a JSON object of the targets.
 */
const attack = `
const fs = require("node:fs"), net = require("node:net")
const t = JSON.parse(process.argv[1])
const out = {}
const tryRead = (name, path) => { try { fs.readFileSync(path); out[name] = "read" } catch (e) { out[name] = e.code || String(e) } }
for (const f of t.files) tryRead("file:" + f, f)
tryRead("victim-volume", t.victimFile)
try { fs.readdirSync(t.dataDir); out["list-data-dir"] = "listed" } catch (e) { out["list-data-dir"] = e.code || String(e) }
const status = fs.readFileSync("/proc/self/status", "utf8")
out.capEff = /^CapEff:\\s*(\\S+)/m.exec(status)[1]
out.noNewPrivs = /^NoNewPrivs:\\s*(\\S+)/m.exec(status)[1]
out.uid = process.getuid()
out.gid = process.getgid()
const body = JSON.stringify({ command: ["sh", "-c", "touch " + t.marker] })
const s = net.connect(t.socket)
let answer = ""
s.on("connect", () => s.end("POST /v1/containers/" + t.victimId + "/exec HTTP/1.1\\r\\nHost: kbox\\r\\nContent-Type: application/json\\r\\nContent-Length: " + body.length + "\\r\\nConnection: close\\r\\n\\r\\n" + body))
s.on("data", (d) => (answer += d))
const done = (what) => { out.socket = what; console.log("RESULT " + JSON.stringify(out)); setInterval(() => {}, 1000) }
s.on("error", (e) => done(e.code || String(e)))
s.on("end", () => done("answered: " + answer.split("\\r\\n")[0]))
`

describe("pods cannot see the node (koder-fleet dev, root)", () => {
  let dir: string
  let dev: FleetProcess
  let api: ReturnType<typeof client>
  let admin: string
  const tokens: Record<string, string> = {}

  const call = (method: string, path: string, token: string, body?: unknown) => api.send(method, path, { token, ...(body === undefined ? {} : { body: JSON.stringify(body) }) })
  const send = async (method: string, path: string, body?: unknown, token = admin) => {
    const r = await call(method, path, token, body)
    if (r.status >= 300) throw new Error(`${method} ${path}: ${r.status} ${r.text}`)
    return r.json() as Json
  }

  /** A tenant: its namespace (baseline: runAsUser 0 is this test's to try) and a fleet:customer token. */
  const tenant = async (ns: string) => {
    await send("POST", "/api/v1/namespaces", { apiVersion: "v1", kind: "Namespace", metadata: { name: ns, labels: { "pod-security.kubernetes.io/enforce": "baseline" } } })
    await send("POST", `/api/v1/namespaces/${ns}/serviceaccounts`, { apiVersion: "v1", kind: "ServiceAccount", metadata: { name: "owner" } })
    await send("POST", `/apis/rbac.authorization.k8s.io/v1/namespaces/${ns}/rolebindings`, {
      apiVersion: "rbac.authorization.k8s.io/v1",
      kind: "RoleBinding",
      metadata: { name: "customer" },
      roleRef: { apiGroup: "rbac.authorization.k8s.io", kind: "ClusterRole", name: "fleet:customer" },
      subjects: [{ kind: "ServiceAccount", name: "owner", namespace: ns }]
    })
    const issued = await send("POST", `/api/v1/namespaces/${ns}/serviceaccounts/owner/token`, { apiVersion: "authentication.k8s.io/v1", kind: "TokenRequest", spec: { audiences: [], expirationSeconds: 3600 } })
    tokens[ns] = String(issued["status"]["token"])
  }

  const pod = (name: string, container: Json, extra: Json = {}) => ({
    apiVersion: "v1",
    kind: "Pod",
    metadata: { name },
    spec: { terminationGracePeriodSeconds: 1, containers: [{ name: "main", image: "busybox", ...container }], ...extra }
  })

  const running = (ns: string, name: string) =>
    eventually(async () => {
      const p = await send("GET", `/api/v1/namespaces/${ns}/pods/${name}`)
      return p["status"]?.["containerStatuses"]?.[0]?.["state"]?.["running"] !== undefined ? p : undefined
    }, 60_000, `${ns}/${name} running`)

  beforeAll(async () => {
    if (process.env.CI === "true") expect(process.getuid?.()).toBe(0)
    // Root is what isolates pods (namespaces, uids); this machine and CI run the tests as root.
    expect(process.getuid?.()).toBe(0)
    dir = await mkdtemp(join(tmpdir(), "fleet-pod-isolation-"))
    dev = await start(["--listen", "127.0.0.1:0", "--metrics-listen", "off", "--dns-listen", "off", "--ingress-listen", "off", "--ingress-tls-listen", "off", "--node-name", "isonode"], "dev", { FLEET_DATA_DIR: dir }, 90_000)
    const creds = credentials(dev.kubeconfig)
    admin = creds.token
    api = client(dev.port, creds.ca)
    await tenant("victim")
    await tenant("attacker")
  }, 180_000)

  afterAll(async () => {
    api?.close()
    if (dev !== undefined && dev.child.exitCode === null) {
      dev.child.kill("SIGINT")
      const stopped = await Promise.race([dev.exited, new Promise((r) => setTimeout(() => r("timeout"), 30_000))])
      if (stopped === "timeout") dev.child.kill("SIGKILL")
    }
    if (dir !== undefined) await rm(dir, { recursive: true, force: true })
  }, 45_000)

  it("a tenant's pod runs as a uid that is not root, without capabilities, and reaches none of the node's secrets, the box's socket or another tenant's pod", async () => {
    // The victim: a file in its emptyDir.
    const victim = pod(
      "holder",
      { command: ["sh", "-c", "echo victim-secret >/data/secret.txt; sleep 1000"], volumeMounts: [{ name: "data", mountPath: "/data" }] },
      { volumes: [{ name: "data", emptyDir: {} }] }
    )
    expect((await call("POST", "/api/v1/namespaces/victim/pods", tokens["victim"]!, victim)).status).toBe(201)
    const v = await running("victim", "holder")
    const victimId = String(v["status"]["containerStatuses"][0]["containerID"]).replace(/^kbox:\/\//, "")
    // Where the victim's file is on the host (the attacker is given the exact path).
    const victimFile = await eventually(() => {
      const found: Array<string> = []
      const walk = (d: string, depth: number) => {
        if (depth > 8) return
        for (const e of readdirSync(d, { withFileTypes: true })) {
          const p = join(d, e.name)
          if (e.isDirectory()) walk(p, depth + 1)
          else if (e.name === "secret.txt") found.push(p)
        }
      }
      walk(join(dir, "agent"), 0)
      return found[0]
    }, 20_000, "the victim's file on the host")
    // The node's secrets: every file of the data dir (kubeconfig, keys, state.db...) and the agent's.
    const files = [dir, join(dir, "agent")].flatMap((d) => readdirSync(d).map((n) => join(d, n)).filter((p) => statSync(p).isFile()))
    expect(files).toContain(join(dir, "kubeconfig"))
    expect(files.some((f) => f.endsWith("state.db"))).toBe(true)
    const socket = join(dir, "box", "box.sock")
    expect(existsSync(socket)).toBe(true)
    const marker = join(dir, "exec-marker")
    const targets = { files, victimFile, dataDir: dir, socket, victimId, marker }

    const attacker = pod("probe", {
      command: [process.execPath, "-e", attack, JSON.stringify(targets)],
      securityContext: { allowPrivilegeEscalation: false, capabilities: { drop: ["ALL"] } }
    }, { securityContext: { runAsNonRoot: true, seccompProfile: { type: "RuntimeDefault" } } })
    expect((await call("POST", "/api/v1/namespaces/attacker/pods", tokens["attacker"]!, attacker)).status).toBe(201)
    const line = await eventually(async () => {
      const r = await call("GET", "/api/v1/namespaces/attacker/pods/probe/log", admin)
      return /^RESULT (.*)$/m.exec(r.text)?.[1]
    }, 60_000, "the attacker's report")
    const out = JSON.parse(line) as Record<string, string | number>
    // Not root, no capabilities, no way to gain privileges.
    expect(out["uid"]).not.toBe(0)
    expect(out["gid"]).not.toBe(0)
    expect(out["capEff"]).toBe("0000000000000000")
    expect(out["noNewPrivs"]).toBe("1")
    // Nothing of the node read, listed or reached.
    for (const f of files) expect([f, out[`file:${f}`]]).toEqual([f, expect.stringMatching(/^(EACCES|ENOENT)$/)])
    expect(out["victim-volume"]).toMatch(/^(EACCES|ENOENT)$/)
    expect(out["list-data-dir"]).toMatch(/^(EACCES|ENOENT)$/)
    expect(out["socket"]).toMatch(/^(EACCES|ENOENT)$/)
    expect(existsSync(marker)).toBe(false)
  }, 150_000)

  it("a runAsNonRoot pod asking for uid 0 does not start: CreateContainerConfigError with the kubelet's message", async () => {
    const bad = pod("rootly", { command: ["sleep", "1000"], securityContext: { runAsUser: 0 } }, { securityContext: { runAsNonRoot: true } })
    expect((await call("POST", "/api/v1/namespaces/attacker/pods", tokens["attacker"]!, bad)).status).toBe(201)
    const waiting = await eventually(async () => {
      const p = await send("GET", "/api/v1/namespaces/attacker/pods/rootly")
      return p["status"]?.["containerStatuses"]?.[0]?.["state"]?.["waiting"]?.["reason"] === "CreateContainerConfigError" ? p["status"]["containerStatuses"][0]["state"]["waiting"] : undefined
    }, 60_000, "CreateContainerConfigError")
    expect(waiting["message"]).toContain("container has runAsNonRoot and image will run as root")
  }, 90_000)
})
