/**
 * The hub end to end, real processes on loopback: `koder-fleet hub`, and two members
 * (`koder-fleet dev --join-hub`, a server with its own node and store each) joined in pull mode
 * through certificate requests approved with the real kubectl. Members become Ready with their
 * nodes' capacity; a Work applies a Deployment on a member and its availability comes back;
 * a manifest leaving the Work is deleted on the member; one member's certificate cannot read the
 * other's Work; a member whose heartbeat stops (its process paused) is Unknown and NoSchedule
 * within the grace period with nothing deleted, and Ready again when it resumes; members keep
 * running while the hub is down, and the hub catches up after its restart.
 */
import { execFile } from "node:child_process"
import { readFileSync, writeFileSync } from "node:fs"
import { mkdtemp, rm } from "node:fs/promises"
import { request } from "node:https"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { fileURLToPath } from "node:url"
import { promisify } from "node:util"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { client, credentials, eventually, start, type FleetProcess } from "../fixtures/FleetProcess.js"
import * as Fixtures from "./FederationFixtures.js"

const run = promisify(execFile)
const kubectlPath = process.env["KUBECTL"] ?? "/usr/bin/kubectl"
const group = "/apis/federation.fleet.koder.dev/v1alpha1"
const kfleetPath = fileURLToPath(new URL("../../../cli/bin/kfleet.mjs", import.meta.url))

type Json = Record<string, any>

describe("koder-fleet hub with two pull members and a push member", () => {
  let dir: string
  let hub: FleetProcess
  let joinArgs: Array<string>
  const members: Record<string, FleetProcess> = {}
  let http: ReturnType<typeof client>
  let token: string

  const send = async (method: string, path: string, body?: unknown, contentType?: string) => {
    const r = await http.send(method, path, { token, ...(body === undefined ? {} : { body: JSON.stringify(body) }), ...(contentType === undefined ? {} : { headers: { "content-type": contentType } }) })
    return { status: r.status, json: () => r.json() as Json }
  }
  const kubectl = (kubeconfig: string, ...args: ReadonlyArray<string>) => run(kubectlPath, ["--kubeconfig", kubeconfig, ...args]).then((r) => r.stdout)
  const kfleet = (...args: ReadonlyArray<string>) => run(process.execPath, [kfleetPath, "--kubeconfig", hub.kubeconfig, ...args]).then((r) => r.stdout)
  const memberCluster = async (name: string) => (await send("GET", `${group}/memberclusters/${name}`)).json()
  const condition = (mc: Json, type: string) => (mc["status"]?.conditions ?? []).find((c: Json) => c.type === type)

  const startHub = async (port = 0) => {
    hub = await start(["--data-dir", join(dir, "hub"), "--listen", `127.0.0.1:${port}`, "--metrics-listen", "127.0.0.1:0", "--member-grace-period", "12s"], "hub")
    const creds = credentials(hub.kubeconfig)
    token = creds.token
    http = client(hub.port, creds.ca)
  }

  const startMember = async (name: string, region: string, joined = true) => {
    members[name] = await start(
      ["--listen", "127.0.0.1:0", "--node-name", `${name}-node`, "--metrics-listen", "127.0.0.1:0", "--dns-listen", "off", "--ingress-listen", "off", "--ingress-tls-listen", "off", "--region", region, ...(joined ? ["--member-name", name, ...joinArgs] : [])],
      "dev",
      { FLEET_DATA_DIR: join(dir, name) },
      60_000
    )
  }

  /** Approve a member's pending request as an administrator would: with kubectl, or kfleet. */
  const approve = async (name: string, tool: "kubectl" | "kfleet") => {
    const csr = await eventually(() => /certificate request (member-\S+) sent/.exec(members[name]!.stdout())?.[1], 30_000, `${name}'s certificate request`)
    if (tool === "kubectl") expect(await kubectl(hub.kubeconfig, "certificate", "approve", csr)).toContain(`certificatesigningrequest.certificates.k8s.io/${csr} approved`)
    else expect(await kfleet("federation", "approve", name)).toBe(`member ${name} approved (certificatesigningrequest/${csr})\n`)
  }

  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), "fleet-hub-"))
    await startHub()
    const m = /--join-hub (\S+) --hub-token (\S+) --hub-ca-hash (\S+)/.exec(hub.stdout())
    if (m === null) throw new Error(`no member join line in:\n${hub.stdout()}`)
    joinArgs = ["--join-hub", m[1]!, "--hub-token", m[2]!, "--hub-ca-hash", m[3]!]
    // south joins the other way (Push): the hub dials it with its kubeconfig.
    await Promise.all([startMember("east", "eu"), startMember("west", "us"), startMember("south", "ap", false)])
  }, 180_000)

  afterAll(async () => {
    http?.close()
    for (const p of [...Object.values(members), hub]) {
      if (p === undefined) continue
      p.child.kill("SIGCONT")
      if (p.child.exitCode === null) p.child.kill("SIGKILL")
    }
    if (dir) await rm(dir, { recursive: true, force: true })
  })

  it("members join only once approved, then are Ready with their nodes' capacity", async () => {
    // Asked, not yet approved: no member.
    await eventually(() => /certificate request member-east-\S+ sent/.test(members["east"]!.stdout()) || undefined, 30_000, "east's request")
    expect((await send("GET", `${group}/memberclusters/east`)).status).toBe(404)
    const csrs = await kubectl(hub.kubeconfig, "get", "csr", "--no-headers")
    expect(csrs).toMatch(/member-east-\S+\s+\S+\s+federation\.fleet\.koder\.dev\/member\s+system:bootstrap:\S+\s+\S+\s+Pending/)
    await Promise.all([approve("east", "kubectl"), approve("west", "kfleet")])
    for (const name of ["east", "west"]) {
      const mc = await eventually(async () => {
        const o = await memberCluster(name)
        return condition(o, "Ready")?.status === "True" && o["status"]?.nodeCount === 1 ? o : undefined
      }, 30_000, `${name} Ready`).catch((e: Error) => {
        throw new Error(`${e.message}\nmember: ${members[name]!.stderr().slice(-2000)}\nhub: ${hub.stderr().slice(-2000)}`)
      })
      expect(condition(mc, "Joined")?.status).toBe("True")
      expect(mc["spec"]).toMatchObject({ syncMode: "Pull", region: name === "east" ? "eu" : "us" })
      // The capacity is the member's node's.
      const node = JSON.parse(await kubectl(members[name]!.kubeconfig, "get", "node", `${name}-node`, "-o", "json")) as Json
      expect(mc["status"].resources.capacity.cpu).toBe(node["status"].capacity.cpu)
      expect(mc["status"].resources.allocatable.memory).toBe(node["status"].allocatable.memory)
    }
    const table = await kubectl(hub.kubeconfig, "get", "memberclusters", "--no-headers")
    expect(table).toMatch(/^east\s+True\s+Pull\s+eu\s+1\s+/m)
    expect(table).toMatch(/^west\s+True\s+Pull\s+us\s+1\s+/m)
    // How fresh the hub's view is: the member measures its reports' round trip, the hub their age.
    const scrape = async (p: FleetProcess, kubeconfig: string) => {
      const port = /metrics on http:\/\/127\.0\.0\.1:(\d+)\/metrics/.exec(p.stdout())![1]
      const r = await fetch(`http://127.0.0.1:${port}/metrics`, { headers: { authorization: `Bearer ${credentials(kubeconfig).token}` } })
      return r.text()
    }
    const series = (text: string, name: string) => Number(new RegExp(`^${name} (\\S+)$`, "m").exec(text)?.[1] ?? NaN)
    const age = series(await scrape(hub, hub.kubeconfig), 'fleet_federation_member_status_age_seconds\\{member="east"\\}')
    expect(age).toBeGreaterThanOrEqual(0)
    expect(age).toBeLessThan(12)
    await kubectl(members["east"]!.kubeconfig, "label", "node", "east-node", "probe=1")
    await eventually(async () => (series(await scrape(members["east"]!, members["east"]!.kubeconfig), 'fleet_federation_status_sync_duration_seconds_count\\{member="east"\\}') > 0 ? true : undefined), 10_000, "east's status sync measured")
    expect(await kfleet("federation", "members")).toMatch(/^NAME\s+READY\s+MODE\s+REGION\s+NODES\s+CPU\s+MEMORY\s+AGE\n(.*\n)?east\s+True\s+Pull\s+eu\s+1\s+\S+\/\d+\s+/m)
  }, 120_000)

  const work = (manifests: ReadonlyArray<Json>) => Fixtures.work("east", manifests)
  const { deployment, config } = Fixtures

  it("a Work applies a Deployment on its member, and its availability comes back to the hub", async () => {
    expect((await send("POST", `${group}/namespaces/fleet-member-east/works`, work([deployment]))).status).toBe(201)
    const done = await eventually(async () => {
      const w = (await send("GET", `${group}/namespaces/fleet-member-east/works/web`)).json()
      return condition(w, "Available")?.status === "True" ? w : undefined
    }, 60_000, "the Work Available").catch((e: Error) => {
      throw new Error(`${e.message}\n${members["east"]!.stderr().slice(-2000)}`)
    })
    expect(done["status"].manifestConditions[0].resourceMeta).toMatchObject({ kind: "Deployment", name: "web", namespace: "default" })
    expect(done["status"].manifestConditions[0].statusFeedback.availableReplicas).toBe(1)
    const onMember = JSON.parse(await kubectl(members["east"]!.kubeconfig, "get", "deployment", "web", "-o", "json", "--show-managed-fields")) as Json
    expect(onMember["metadata"].labels).toMatchObject({ "federation.fleet.koder.dev/work": "web", "federation.fleet.koder.dev/member": "east", "fleet.koder.dev/region": "eu" })
    expect(onMember["metadata"].managedFields.map((f: Json) => f.manager)).toContain("fleet-member-agent")
    // The other member got nothing.
    expect(await kubectl(members["west"]!.kubeconfig, "get", "deployments", "--no-headers").catch(() => "")).not.toContain("web")
  }, 90_000)

  it("a manifest leaving the Work is deleted on the member; one the member did not make is never touched", async () => {
    // An object of the same kind the member's own user made: not the Work's.
    await kubectl(members["east"]!.kubeconfig, "create", "configmap", "mine", "--from-literal=a=b")
    const w = (await send("GET", `${group}/namespaces/fleet-member-east/works/web`)).json()
    expect((await send("PUT", `${group}/namespaces/fleet-member-east/works/web`, { ...w, spec: { workload: { manifests: [config] } } })).status).toBe(200)
    await eventually(async () => ((await kubectl(members["east"]!.kubeconfig, "get", "deployments", "--no-headers").catch(() => "")).includes("web") ? undefined : true), 30_000, "the Deployment deleted on east")
    expect(await kubectl(members["east"]!.kubeconfig, "get", "configmap", "settings", "-o", "jsonpath={.data.mode}")).toBe("federated")
    expect(await kubectl(members["east"]!.kubeconfig, "get", "configmap", "mine", "-o", "jsonpath={.data.a}")).toBe("b")
  }, 60_000)

  it("a member's certificate reads its own Works and not another member's", async () => {
    const ca = readFileSync(join(dir, "west", "hub", "hub-ca.crt"), "utf8")
    const cert = readFileSync(join(dir, "west", "hub", "member.crt"), "utf8")
    const key = readFileSync(join(dir, "west", "hub", "member.key"), "utf8")
    const memberToken = readFileSync(join(dir, "west", "hub", "member.token"), "utf8").trim()
    const get = (path: string, bearer: string | null = memberToken) =>
      new Promise<{ status: number; body: string }>((resolve, reject) => {
        const req = request({ host: "127.0.0.1", port: hub.port, path, ca, cert, key, headers: bearer === null ? {} : { authorization: `Bearer ${bearer}` } }, (res) => {
          let body = ""
          res.on("data", (d: Buffer) => (body += d.toString()))
          res.on("end", () => resolve({ status: res.statusCode ?? 0, body }))
        })
        req.on("error", reject)
        req.end()
      })
    expect((await get(`${group}/namespaces/fleet-member-west/works`)).status).toBe(200)
    // The key alone is not the member: its own token goes with it.
    const keyOnly = await get(`${group}/namespaces/fleet-member-west/works`, null)
    expect(keyOnly.status).toBe(401)
    expect(keyOnly.body).toContain("its member token is missing")
    expect((await get(`${group}/namespaces/fleet-member-west/works`, "not-the-token")).status).toBe(401)
    const other = await get(`${group}/namespaces/fleet-member-east/works`)
    expect(other.status).toBe(403)
    expect(other.body).toContain('member \\"west\\" may only reach Works in fleet-member-west')
    expect((await get("/api/v1/namespaces/kube-system/secrets")).status).toBe(403)
  }, 30_000)

  it("a member whose heartbeat stops is Unknown and NoSchedule within the grace period, nothing deleted; Ready again when it resumes", async () => {
    const east = members["east"]!
    east.child.kill("SIGSTOP")
    const unknown = await eventually(async () => {
      const mc = await memberCluster("east")
      return condition(mc, "Ready")?.status === "Unknown" && (mc["spec"].taints ?? []).some((t: Json) => t.key === "federation.fleet.koder.dev/unreachable") ? mc : undefined
    }, 40_000, "east Unknown and tainted")
    expect(unknown["spec"].taints.find((t: Json) => t.key === "federation.fleet.koder.dev/unreachable").effect).toBe("NoSchedule")
    // Its Work stays as it was on the hub: nothing is evicted.
    expect((await send("GET", `${group}/namespaces/fleet-member-east/works/web`)).status).toBe(200)
    east.child.kill("SIGCONT")
    await eventually(async () => {
      const mc = await memberCluster("east")
      return condition(mc, "Ready")?.status === "True" && !(mc["spec"].taints ?? []).some((t: Json) => t.key === "federation.fleet.koder.dev/unreachable") ? true : undefined
    }, 30_000, "east Ready again, untainted")
    expect(await kubectl(east.kubeconfig, "get", "configmap", "settings", "-o", "jsonpath={.data.mode}")).toBe("federated")
    // One copy, not two, after the reconnect.
    expect((await kubectl(east.kubeconfig, "get", "configmaps", "-l", "federation.fleet.koder.dev/work=web", "--no-headers")).trim().split("\n")).toHaveLength(1)
  }, 90_000)

  it("a Push member: the hub dials it with the kubeconfig it was given; Ready with its capacity, and its Works apply", async () => {
    const south = members["south"]!
    // kfleet keeps the member's kubeconfig in a Secret on the hub and registers it as Push.
    expect(await kfleet("federation", "join", "south", "--member-kubeconfig", south.kubeconfig, "--region", "ap")).toBe(
      `member south registered (push mode: the hub dials https://127.0.0.1:${south.port}); kfleet federation members shows it Ready once the hub reaches it\n`
    )
    const secret = JSON.parse(await kubectl(hub.kubeconfig, "get", "secret", "south-kubeconfig", "-n", "fleet-federation", "-o", "json")) as Json
    expect(Buffer.from(secret["data"].kubeconfig, "base64").toString()).toContain(`server: https://127.0.0.1:${south.port}`)
    expect((await memberCluster("south"))["spec"]).toMatchObject({ syncMode: "Push", region: "ap", secretRef: { namespace: "fleet-federation", name: "south-kubeconfig" } })
    const mc = await eventually(async () => {
      const o = await memberCluster("south")
      return condition(o, "Ready")?.status === "True" && o["status"]?.nodeCount === 1 ? o : undefined
    }, 30_000, "south Ready").catch(async (e: Error) => {
      throw new Error(`${e.message}\n${JSON.stringify((await memberCluster("south"))["status"])}\nhub: ${hub.stderr().slice(-2000)}`)
    })
    expect(condition(mc, "Joined")).toMatchObject({ status: "True", reason: "HubDialsMember" })
    const node = JSON.parse(await kubectl(south.kubeconfig, "get", "node", "south-node", "-o", "json")) as Json
    expect(mc["status"].resources.capacity.cpu).toBe(node["status"].capacity.cpu)
    expect(await kubectl(hub.kubeconfig, "get", "memberclusters", "south", "--no-headers")).toMatch(/^south\s+True\s+Push\s+ap\s+1\s+/m)
    const w = { ...work([config]), metadata: { name: "settings", namespace: "fleet-member-south" } }
    expect((await send("POST", `${group}/namespaces/fleet-member-south/works`, w)).status).toBe(201)
    await eventually(async () => condition((await send("GET", `${group}/namespaces/fleet-member-south/works/settings`)).json(), "Applied")?.status === "True" || undefined, 30_000, "south's Work Applied")
    expect(await kubectl(south.kubeconfig, "get", "configmap", "settings", "-o", "jsonpath={.metadata.labels.fleet\\.koder\\.dev/region}")).toBe("ap")
  }, 90_000)

  const proxy = (member: string) => `https://127.0.0.1:${hub.port}${group}/memberclusters/${member}/proxy`

  it("the proxy reaches one member as the caller: kubectl through it, the hub's RBAC first, then the member's, audited on the member", async () => {
    // kubectl pointed at the proxy works as if at the member (discovery, tables, writes), for Pull and Push members alike.
    for (const name of ["east", "south"]) {
      expect(await kubectl(hub.kubeconfig, "--server", proxy(name), "get", "nodes", "--no-headers")).toMatch(new RegExp(`^${name}-node\\s+Ready`, "m"))
    }
    expect(await kubectl(hub.kubeconfig, "--server", proxy("east"), "create", "configmap", "via-hub", "--from-literal=k=v")).toContain("configmap/via-hub created")
    expect(await kubectl(members["east"]!.kubeconfig, "get", "configmap", "via-hub", "-o", "jsonpath={.data.k}")).toBe("v")
    // The member's audit log names the hub's user, impersonated.
    const audit = await eventually(
      () => readFileSync(join(dir, "east", "audit.log"), "utf8").split("\n").find((l) => l.includes('"verb":"create"') && l.includes('"resource":"configmaps"') && l.includes("impersonatedUser")),
      10_000,
      "the member's audit record"
    )
    expect(JSON.parse(audit)).toMatchObject({ verb: "create", namespace: "default", code: 201, impersonatedUser: { user: "fleet:bootstrap-admin" } })
    // A hub user with proxy rights on east only.
    await kubectl(hub.kubeconfig, "create", "serviceaccount", "viewer", "-n", "default")
    await kubectl(hub.kubeconfig, "create", "clusterrole", "east-proxy", "--verb=get", "--resource=memberclusters/proxy", "--resource-name=east")
    await kubectl(hub.kubeconfig, "create", "clusterrolebinding", "east-proxy", "--clusterrole=east-proxy", "--serviceaccount=default:viewer")
    const viewer = (await kubectl(hub.kubeconfig, "create", "token", "viewer", "-n", "default")).trim()
    // kubectl's --raw paths start at the server's root, so they name the proxy themselves; other commands go through --server.
    const asViewer = (member: string, ...args: ReadonlyArray<string>) =>
      run(kubectlPath, ["--kubeconfig", hub.kubeconfig, "--token", viewer, ...(args[1] === "--raw" ? ["get", "--raw", `${group}/memberclusters/${member}/proxy${args[2]!}`] : ["--server", proxy(member), ...args])]).then(
        (r) => ({ ok: true, out: r.stdout }),
        (e: { stderr?: string }) => ({ ok: false, out: e.stderr ?? "" })
      )
    // The hub refuses west outright.
    const west = await asViewer("west", "get", "--raw", "/api/v1/namespaces/default/configmaps")
    expect(west.ok).toBe(false)
    expect(west.out).toMatch(/forbidden: User "system:serviceaccount:default:viewer" cannot get resource "memberclusters\/proxy"/)
    // The hub lets the request through to east, whose own RBAC knows nothing of the viewer.
    const east = await asViewer("east", "get", "--raw", "/api/v1/namespaces/default/configmaps")
    expect(east.ok).toBe(false)
    expect(east.out).toMatch(/forbidden: User "system:serviceaccount:default:viewer" cannot list resource "configmaps"/)
    // Once east's administrator grants it, the viewer reads east through the hub, and cannot write.
    const binding = join(dir, "hub-viewer.json")
    writeFileSync(binding, JSON.stringify({ apiVersion: "rbac.authorization.k8s.io/v1", kind: "RoleBinding", metadata: { name: "hub-viewer", namespace: "default" }, roleRef: { apiGroup: "rbac.authorization.k8s.io", kind: "ClusterRole", name: "view" }, subjects: [{ kind: "User", name: "system:serviceaccount:default:viewer" }] }))
    await kubectl(members["east"]!.kubeconfig, "apply", "-f", binding)
    const granted = await asViewer("east", "get", "--raw", "/api/v1/namespaces/default/configmaps/via-hub")
    expect(granted.ok).toBe(true)
    expect(JSON.parse(granted.out)["data"]).toEqual({ k: "v" })
    expect((await asViewer("east", "delete", "configmap", "via-hub")).ok).toBe(false)
  }, 90_000)

  it("an aggregated list over three members returns every pod once, each with its member", async () => {
    for (const name of ["east", "west", "south"]) await kubectl(members[name]!.kubeconfig, "run", `pod-${name}`, "--image=busybox", "--", "sleep", "3600")
    const list = JSON.parse(await kubectl(hub.kubeconfig, "get", "--raw", `${group}/aggregate/core/v1/pods`)) as Json
    expect(list["kind"]).toBe("PodList")
    const seen = new Map<string, string>()
    for (const name of ["east", "west", "south"]) {
      const pods = JSON.parse(await kubectl(members[name]!.kubeconfig, "get", "pods", "-A", "-o", "json")) as Json
      for (const p of pods["items"]) seen.set(p.metadata.uid, name)
    }
    const got = (list["items"] as Array<Json>).map((p): [string, string] => [p.metadata.uid, p.metadata.annotations["federation.fleet.koder.dev/member"]])
    expect(new Set(got.map(([uid]) => uid)).size).toBe(got.length)
    expect(new Map(got)).toEqual(seen)
    expect([...seen.values()].sort()).toEqual(["east", "south", "west"])
    // kfleet prints it as a table, the member first (each member renders its rows, the hub merges them).
    const table = await kfleet("get", "pods", "-n", "default", "--all-members")
    expect(table.split("\n")[0]).toMatch(/^MEMBER\s+NAME\s+READY\s+STATUS\s+RESTARTS\s+AGE$/)
    for (const name of ["east", "west", "south"]) expect(table).toMatch(new RegExp(`^${name}\\s+pod-${name}\\s+`, "m"))
    // Namespaced and selected: only the member that has them.
    const selected = JSON.parse(await kubectl(hub.kubeconfig, "get", "--raw", `${group}/aggregate/core/v1/namespaces/default/configmaps?labelSelector=federation.fleet.koder.dev%2Fwork`)) as Json
    expect((selected["items"] as Array<Json>).map((c) => `${c.metadata.annotations["federation.fleet.koder.dev/member"]}/${c.metadata.name}`).sort()).toEqual(["east/settings", "south/settings"])
  }, 60_000)

  it("members keep running while the hub is down, and the hub catches up after its restart", async () => {
    http.close()
    // The members' tunnels and watches end with the drain: the hub stops in seconds, not at its hard deadline.
    const stopping = Date.now()
    hub.child.kill("SIGTERM")
    await hub.exited
    expect(Date.now() - stopping).toBeLessThan(10_000)
    // The member's cluster still answers, and the Work's object is still there.
    expect(await kubectl(members["west"]!.kubeconfig, "get", "nodes", "--no-headers")).toMatch(/^west-node\s+Ready/m)
    expect(await kubectl(members["east"]!.kubeconfig, "get", "configmap", "settings", "-o", "jsonpath={.data.mode}")).toBe("federated")
    // Members know the hub by its address: it comes back on the same one.
    await startHub(hub.port)
    for (const name of ["east", "west"]) {
      await eventually(async () => {
        const mc = await memberCluster(name)
        const beat = Date.parse(mc["status"]?.lastHeartbeatTime ?? "")
        return condition(mc, "Ready")?.status === "True" && Date.now() - beat < 15_000 ? true : undefined
      }, 40_000, `${name} reporting to the restarted hub`)
    }
    // The members' tunnels are dialled again: the proxy answers.
    await eventually(() => kubectl(hub.kubeconfig, "--server", proxy("west"), "get", "nodes", "--no-headers").then((o) => /^west-node\s+Ready/m.test(o) || undefined, () => undefined), 40_000, "west's tunnel back")
  }, 120_000)
})
