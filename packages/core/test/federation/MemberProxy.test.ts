import { describe, expect, it } from "vitest"
import type { Http } from "../../src/index.js"
import { MemberProxy, MemberTunnel } from "../../src/index.js"

/** Two ends of a message channel, as a WebSocket delivers them (whole messages, in order). */
const pair = (): { readonly hub: Http.MessageSocket; readonly member: Http.MessageSocket; readonly sent: Array<Uint8Array> } => {
  const sent: Array<Uint8Array> = []
  const queue = () => {
    const items: Array<Uint8Array> = []
    const waiters: Array<(r: IteratorResult<Uint8Array>) => void> = []
    let closed = false
    return {
      push: (m: Uint8Array) => (waiters.length > 0 ? waiters.shift()!({ value: m, done: false }) : items.push(m)),
      close: () => {
        closed = true
        for (const w of waiters.splice(0)) w({ value: undefined, done: true })
      },
      iterable: {
        [Symbol.asyncIterator]: () => ({
          next: () => (items.length > 0 ? Promise.resolve({ value: items.shift()!, done: false }) : closed ? Promise.resolve({ value: undefined, done: true }) : new Promise<IteratorResult<Uint8Array>>((r) => waiters.push(r)))
        })
      } as AsyncIterable<Uint8Array>
    }
  }
  const toMember = queue()
  const toHub = queue()
  const close = () => (toMember.close(), toHub.close())
  const end = (out: ReturnType<typeof queue>, inbox: ReturnType<typeof queue>): Http.MessageSocket => ({
    send: async (m) => {
      sent.push(m)
      out.push(m.slice())
    },
    buffered: () => 0,
    messages: inbox.iterable,
    close
  })
  return { hub: end(toMember, toHub), member: end(toHub, toMember), sent }
}

const text = (b: Uint8Array | undefined) => new TextDecoder().decode(b ?? new Uint8Array(0))

describe("MemberProxy.memberPath", () => {
  it.each([
    ["core/v1/pods", "/api/v1/pods"],
    ["core/v1/namespaces/default/pods", "/api/v1/namespaces/default/pods"],
    ["apps/v1/deployments", "/apis/apps/v1/deployments"],
    ["apps/v1/namespaces/web/deployments", "/apis/apps/v1/namespaces/web/deployments"],
    ["core/v1", undefined],
    ["core", undefined],
    ["", undefined],
    ["apps//deployments", undefined],
    ["apps/v1/namespaces//deployments", undefined]
  ])("%s → %s", (subpath, path) => {
    expect(MemberProxy.memberPath(subpath)).toBe(path)
  })
})

describe("MemberProxy.merge", () => {
  it("keeps every item once, in member order, each annotated with its member; failures become warnings", () => {
    const list = (...names: Array<string>) => ({ apiVersion: "v1", kind: "PodList", metadata: { resourceVersion: "9" }, items: names.map((name) => ({ metadata: { name, annotations: { keep: "me" } } })) })
    const { list: merged, warnings } = MemberProxy.merge([
      { member: "east", list: list("a", "b") },
      { member: "west", error: "the member's tunnel closed" },
      { member: "south", list: list("a") }
    ])
    expect(merged["kind"]).toBe("PodList")
    // A merged list has no single resourceVersion: none is claimed.
    expect(merged["metadata"]).toEqual({})
    expect((merged["items"] as Array<any>).map((i) => [i.metadata.name, i.metadata.annotations[MemberProxy.MemberAnnotation], i.metadata.annotations.keep])).toEqual([
      ["a", "east", "me"],
      ["b", "east", "me"],
      ["a", "south", "me"]
    ])
    expect(warnings).toEqual(["member west: the member's tunnel closed"])
  })
  it("no member answering is an empty List, every member warned about", () => {
    const { list, warnings } = MemberProxy.merge([{ member: "east" }, { member: "west", error: "timeout" }])
    expect(list).toEqual({ apiVersion: "v1", kind: "List", metadata: {}, items: [] })
    expect(warnings).toEqual(["member east: no answer", "member west: timeout"])
  })
})

describe("MemberTunnel", () => {
  const impersonated = { "Impersonate-User": "alice", "Impersonate-Group": "devs" }

  it("carries requests and answers both ways, concurrently and out of order, bodies across many frames", async () => {
    const { hub, member, sent } = pair()
    const seen: Array<{ method: string; path: string; user: string | undefined; size: number }> = []
    void MemberTunnel.serve(member, async (r) => {
      seen.push({ method: r.method, path: r.path, user: r.headers["impersonate-user"], size: r.body?.length ?? 0 })
      // The first request answers last.
      if (r.path === "/slow") await new Promise((resolve) => setTimeout(resolve, 50))
      const body = r.path === "/big" ? new Uint8Array(MemberTunnel.chunkBytes * 2 + 17).fill(7) : new TextEncoder().encode(`${r.method} ${r.path}`)
      return { status: 200, headers: { "content-type": "text/plain" }, body }
    })
    const { connection } = MemberTunnel.client(hub)
    const upload = new Uint8Array(MemberTunnel.chunkBytes + 5).fill(1)
    const [slow, fast, big, posted] = await Promise.all([
      connection.request({ method: "GET", path: "/slow", headers: impersonated }),
      connection.request({ method: "GET", path: "/fast", headers: impersonated }),
      connection.request({ method: "GET", path: "/big", headers: impersonated }),
      connection.request({ method: "POST", path: "/upload", headers: impersonated, body: upload })
    ])
    expect(text(slow.body)).toBe("GET /slow")
    expect(text(fast.body)).toBe("GET /fast")
    expect(big.body.length).toBe(MemberTunnel.chunkBytes * 2 + 17)
    expect(big.body.every((b) => b === 7)).toBe(true)
    expect(posted.status).toBe(200)
    expect(seen.find((s) => s.path === "/upload")).toEqual({ method: "POST", path: "/upload", user: "alice", size: MemberTunnel.chunkBytes + 5 })
    // No frame is larger than a chunk and its 5-byte header.
    expect(Math.max(...sent.map((m) => m.length))).toBeLessThanOrEqual(MemberTunnel.chunkBytes + 5)
    hub.close()
  })

  it("the member refuses a request that impersonates no one: the tunnel never acts as the member", async () => {
    const { hub, member } = pair()
    let handled = 0
    void MemberTunnel.serve(member, async () => {
      handled++
      return { status: 200, headers: {}, body: new Uint8Array(0) }
    })
    const { connection } = MemberTunnel.client(hub)
    const r = await connection.request({ method: "GET", path: "/api/v1/secrets", headers: {} })
    expect(r.status).toBe(403)
    expect(JSON.parse(text(r.body))).toMatchObject({ kind: "Status", code: 403, message: "the member answers the hub's tunnel only for an impersonated user" })
    expect(handled).toBe(0)
    hub.close()
  })

  it("the hub bounds an answer's size and its wait, and fails what is pending when the tunnel closes", async () => {
    const { hub, member } = pair()
    void MemberTunnel.serve(member, async (r) => {
      if (r.path === "/never") return new Promise(() => {})
      return { status: 200, headers: {}, body: new Uint8Array(2048) }
    })
    const { connection, closed } = MemberTunnel.client(hub, { timeoutMs: 100, maxResponseBytes: 1024 })
    await expect(connection.request({ method: "GET", path: "/huge", headers: impersonated })).rejects.toThrow("the member's response is over 1024 bytes")
    await expect(connection.request({ method: "GET", path: "/never", headers: impersonated })).rejects.toThrow("the member did not answer within 100 ms")
    const waiting = connection.request({ method: "GET", path: "/never", headers: impersonated })
    hub.close()
    await expect(waiting).rejects.toThrow("the member's tunnel closed")
    await closed
    await expect(connection.request({ method: "GET", path: "/fast", headers: impersonated })).rejects.toThrow("the member's tunnel closed")
  })

  it("a malformed request head is refused with 400, and the tunnel goes on", async () => {
    const { hub, member } = pair()
    void MemberTunnel.serve(member, async () => ({ status: 204, headers: {}, body: new Uint8Array(0) }))
    const answers: Array<Uint8Array> = []
    void (async () => {
      for await (const m of hub.messages) answers.push(m)
    })()
    const head = (id: number, json: string) => {
      const payload = new TextEncoder().encode(json)
      const f = new Uint8Array(5 + payload.length)
      f[0] = 1
      new DataView(f.buffer).setUint32(1, id)
      f.set(payload, 5)
      return f
    }
    await hub.send(head(7, "{not json"))
    await hub.send(head(8, JSON.stringify({ method: "GET", path: "no-slash", headers: {} })))
    await hub.send(new Uint8Array([9]))
    const deadline = Date.now() + 2000
    while (answers.filter((a) => a[0] === 3).length < 2 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 5))
    const heads = answers.filter((a) => a[0] === 1).map((a) => ({ id: new DataView(a.buffer, a.byteOffset).getUint32(1), status: JSON.parse(text(a.subarray(5))).status }))
    expect(heads).toEqual([
      { id: 7, status: 400 },
      { id: 8, status: 400 }
    ])
    hub.close()
  })
})

describe("MemberProxy.mergeTables", () => {
  it("puts each member's rows under a Member column, in member order; members without a Table become warnings", () => {
    const columns = [{ name: "Name", type: "string", format: "name", description: "", priority: 0 }, { name: "Status", type: "string", format: "", description: "", priority: 0 }]
    const table = (...rows: Array<[string, string]>) => ({
      apiVersion: "meta.k8s.io/v1",
      kind: "Table",
      columnDefinitions: columns,
      rows: rows.map(([name, status]) => ({ cells: [name, status], object: { kind: "PartialObjectMetadata", metadata: { name } } }))
    })
    const { list, warnings } = MemberProxy.mergeTables([
      { member: "east", list: table(["web-1", "Running"]) },
      { member: "north", list: { kind: "PodList", items: [] } },
      { member: "west", list: table(["web-1", "Pending"], ["db-0", "Running"]) },
      { member: "south", error: "no answer in time" }
    ])
    expect((list["columnDefinitions"] as Array<any>).map((c) => c.name)).toEqual(["Member", "Name", "Status"])
    expect((list["rows"] as Array<any>).map((r) => r.cells)).toEqual([
      ["east", "web-1", "Running"],
      ["west", "web-1", "Pending"],
      ["west", "db-0", "Running"]
    ])
    expect((list["rows"] as Array<any>).map((r) => r.object.metadata.annotations[MemberProxy.MemberAnnotation])).toEqual(["east", "west", "west"])
    expect(warnings).toEqual(["member north: no Table in its answer", "member south: no answer in time"])
  })
})
