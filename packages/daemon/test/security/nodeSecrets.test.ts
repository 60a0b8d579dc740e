/**
 * Secrets stay secret on the node (issue 29): `koder-fleet dev` runs a pod that takes a Secret as
 * an environment variable and as two volumes. The pod sees the value in both; the data dir (the
 * store, the box's records and logs, the agent's directory) holds neither the value nor its base64
 * anywhere on its disk; the volume files sit on a tmpfs outside the data dir, owned by the pod's
 * uid, 0400 by default and 0600 where `defaultMode` says so, and go with the pod; `state.db`, its
 * WAL and every key and token file are 0600, the data dir 0700.
 */
import { createHash } from "node:crypto"
import { existsSync, lstatSync, readdirSync, readFileSync, statSync, statfsSync } from "node:fs"
import { mkdtemp, rm } from "node:fs/promises"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { client, credentials, eventually, start, type FleetProcess } from "../fixtures/FleetProcess.js"

type Json = Record<string, any>

const tmpfsMagic = 0x01021994
const sha256 = (text: string) => createHash("sha256").update(text).digest("hex")

/** Regular files under `dir` on `dir`'s own filesystem (a mount inside it is another disk, or none). */
const diskFiles = (dir: string): Array<string> => {
  const dev = statSync(dir).dev
  const out: Array<string> = []
  const walk = (d: string) => {
    for (const e of readdirSync(d, { withFileTypes: true })) {
      const p = join(d, e.name)
      let st
      try {
        st = lstatSync(p)
      } catch {
        continue // removed meanwhile
      }
      if (st.dev !== dev) continue
      if (st.isDirectory()) walk(p)
      else if (st.isFile()) out.push(p)
    }
  }
  walk(dir)
  return out
}

const containing = (files: ReadonlyArray<string>, needle: string) =>
  files.filter((f) => {
    try {
      return readFileSync(f).includes(needle)
    } catch {
      return false
    }
  })

describe("Secrets on the node", () => {
  let dir: string
  let dev: FleetProcess
  let http: ReturnType<typeof client>
  let token: string
  const secret = `pw-${Math.random().toString(36).slice(2)}-${Date.now().toString(36)}`
  const uid = 1000
  // Where the pod mounts its volumes (made on the host by the box's bind mounts: removed after).
  const mnt = join(tmpdir(), `fleet-secrets-mnt-${Math.random().toString(36).slice(2, 8)}`)

  const api = async (method: string, path: string, body?: unknown) => {
    const r = await http.send(method, path, { token, ...(body === undefined ? {} : { body: JSON.stringify(body) }) })
    return { status: r.status, json: () => r.json() as Json, text: r.text }
  }

  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), "fleet-secrets-"))
    dev = await start(
      ["--listen", "127.0.0.1:0", "--ingress-listen", "off", "--ingress-tls-listen", "off", "--metrics-listen", "off", "--dns-listen", "off", "--nodeport-address", "off", "--node-name", "secretsnode"],
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
      await Promise.race([dev.exited, new Promise((r) => setTimeout(r, 60_000))])
      if (dev.child.exitCode === null) dev.child.kill("SIGKILL")
    }
    await rm(dir, { recursive: true, force: true })
    await rm(mnt, { recursive: true, force: true })
  }, 90_000)

  it("gives the pod its Secret as env and volumes, and leaves no value on the node's disk", async () => {
    expect((await api("POST", "/api/v1/namespaces/default/secrets", { apiVersion: "v1", kind: "Secret", metadata: { name: "creds" }, stringData: { password: secret } })).status).toBe(201)
    // The pod prints hashes, never the value (its log is in the data dir).
    const script = [
      `v=\${FLEET_VOLUME_CREDS:-${mnt}/creds}`,
      `w=\${FLEET_VOLUME_CREDS_RW:-${mnt}/creds-rw}`,
      'echo "env=$(printf %s "$PASSWORD" | sha256sum | cut -d" " -f1)"',
      'echo "file=$(cat "$v/password" | sha256sum | cut -d" " -f1)"',
      'echo "rw=$(cat "$w/password" | sha256sum | cut -d" " -f1)"',
      "while :; do sleep 1; done"
    ].join("\n")
    const pod = {
      apiVersion: "v1",
      kind: "Pod",
      metadata: { name: "reader" },
      spec: {
        terminationGracePeriodSeconds: 1,
        securityContext: { runAsUser: uid },
        containers: [
          {
            name: "app",
            image: "busybox",
            command: ["sh", "-c", script],
            env: [{ name: "PASSWORD", valueFrom: { secretKeyRef: { name: "creds", key: "password" } } }],
            volumeMounts: [
              { name: "creds", mountPath: `${mnt}/creds` },
              { name: "creds-rw", mountPath: `${mnt}/creds-rw` }
            ]
          }
        ],
        volumes: [
          { name: "creds", secret: { secretName: "creds" } },
          { name: "creds-rw", secret: { secretName: "creds", defaultMode: 0o600 } }
        ]
      }
    }
    const created = await api("POST", "/api/v1/namespaces/default/pods", pod)
    expect(created.status, created.text).toBe(201)
    const podUid = created.json()["metadata"]["uid"] as string
    const log = await eventually(
      async () => {
        const r = await api("GET", "/api/v1/namespaces/default/pods/reader/log")
        return r.status === 200 && /rw=\w+/.test(r.text) ? r.text : undefined
      },
      90_000,
      "the pod's output"
    )
    // The pod sees the value, in its environment and in both volumes.
    expect(log).toContain(`env=${sha256(secret)}`)
    expect(log).toContain(`file=${sha256(secret)}`)
    expect(log).toContain(`rw=${sha256(secret)}`)

    // The volumes: on a tmpfs outside the data dir, the pod's uid's, 0400 and the defaultMode.
    const memoryDir = join("/dev/shm", `kfleet-${process.getuid?.() ?? 0}-${sha256(join(dir, "agent")).slice(0, 12)}`)
    const volumes = join(memoryDir, "pods", podUid, "volumes", "kubernetes.io~secret")
    const file = join(volumes, "creds", "password")
    expect(readFileSync(file, "utf8")).toBe(secret)
    expect(statfsSync(file).type).toBe(tmpfsMagic)
    expect(statSync(file).mode & 0o777).toBe(0o400)
    expect(statSync(join(volumes, "creds-rw", "password")).mode & 0o777).toBe(0o600)
    if (process.getuid?.() === 0) expect(statSync(file).uid).toBe(uid)
    expect(statSync(memoryDir).mode & 0o777).toBe(0o700)

    // Nothing on the data dir's disk holds the value or its base64.
    const files = diskFiles(dir)
    expect(files.some((f) => f.endsWith("state.db"))).toBe(true)
    expect(files.some((f) => f.endsWith("state.json"))).toBe(true)
    expect(containing(files, secret)).toEqual([])
    expect(containing(files, Buffer.from(secret).toString("base64"))).toEqual([])

    // The files go with the pod.
    expect((await api("DELETE", "/api/v1/namespaces/default/pods/reader?gracePeriodSeconds=0")).status).toBe(200)
    await eventually(() => !existsSync(join(memoryDir, "pods", podUid)) || undefined, 60_000, "the pod's secret volumes to go")
  }, 180_000)

  it("gives a pod that names no uid its Secret files as the uid the box runs it as", async () => {
    const mark = `secrets-plain-${Math.random().toString(36).slice(2, 8)}`
    const script = [`v=\${FLEET_VOLUME_CREDS:-${mnt}/plain}`, 'echo "file=$(cat "$v/password" | sha256sum | cut -d" " -f1)"', "while :; do sleep 1; done"].join("\n")
    const created = await api("POST", "/api/v1/namespaces/default/pods", {
      apiVersion: "v1",
      kind: "Pod",
      metadata: { name: "plain" },
      spec: {
        terminationGracePeriodSeconds: 1,
        containers: [{ name: "app", image: "busybox", command: ["sh", "-c", script, mark], volumeMounts: [{ name: "creds", mountPath: `${mnt}/plain` }] }],
        volumes: [{ name: "creds", secret: { secretName: "creds" } }]
      }
    })
    expect(created.status, created.text).toBe(201)
    const podUid = created.json()["metadata"]["uid"] as string
    const log = await eventually(
      async () => {
        const r = await api("GET", "/api/v1/namespaces/default/pods/plain/log")
        return r.status === 200 && /file=\w+/.test(r.text) ? r.text : undefined
      },
      90_000,
      "the pod's output"
    )
    expect(log).toContain(`file=${sha256(secret)}`)
    // The workload's uid, as the host sees it, owns the file.
    const processUid = await eventually(() => {
      for (const pid of readdirSync("/proc").filter((n) => /^\d+$/.test(n))) {
        try {
          // The workload itself (`sh -c script mark`), not its shim, whose arguments carry it too.
          const argv = readFileSync(`/proc/${pid}/cmdline`, "utf8").split("\0")
          if (!/(^|\/)sh$/.test(argv[0] ?? "") || !argv.includes(mark)) continue
          return Number(/^Uid:\s+(\d+)/m.exec(readFileSync(`/proc/${pid}/status`, "utf8"))?.[1])
        } catch {
          // gone meanwhile
        }
      }
      return undefined
    }, 30_000, "the pod's process")
    const memoryDir = join("/dev/shm", `kfleet-${process.getuid?.() ?? 0}-${sha256(join(dir, "agent")).slice(0, 12)}`)
    const file = join(memoryDir, "pods", podUid, "volumes", "kubernetes.io~secret", "creds", "password")
    expect(statSync(file).uid).toBe(processUid)
    expect(statSync(file).mode & 0o777).toBe(0o400)
    expect((await api("DELETE", "/api/v1/namespaces/default/pods/plain?gracePeriodSeconds=0")).status).toBe(200)
  }, 180_000)

  it("says on the Node whether it enforces limits (as root: it does)", async () => {
    const condition = await eventually(
      async () => ((await api("GET", "/api/v1/nodes/secretsnode")).json()["status"]?.["conditions"] as Array<Json> | undefined)?.find((c) => c["type"] === "LimitsEnforced"),
      60_000,
      "the LimitsEnforced condition"
    )
    expect(condition["status"]).toBe(process.getuid?.() === 0 ? "True" : "False")
  })

  it("keeps the store, its WAL, keys and tokens 0600 and the data dir 0700", () => {
    expect(statSync(dir).mode & 0o777).toBe(0o700)
    for (const name of ["state.db", "state.db-wal", "kubeconfig", "encryption-keys", "service-account.key", "tls/ca.key", "tls/server.key"]) {
      const path = join(dir, name)
      expect(existsSync(path), name).toBe(true)
      expect((statSync(path).mode & 0o777).toString(8), name).toBe("600")
    }
    // No file of the data dir is open to others but the certificates (public by nature).
    // A file removed since the walk (a sandbox record of a pod going away) is open to nobody.
    const open = diskFiles(dir).filter((f) => !f.endsWith(".crt") && ((statSync(f, { throwIfNoEntry: false })?.mode ?? 0) & 0o077) !== 0)
    expect(open).toEqual([])
  })
})
