/**
 * Watches from resourceVersion 0 start with every matching object as ADDED: those events, and
 * their encoded lines, are shared by all watchers (one per object revision), and freed once no
 * watcher holds them.
 */
import { describe, expect, it } from "@effect/vitest"
import { setFlagsFromString } from "node:v8"
import { runInNewContext } from "node:vm"
import * as FieldSelector from "../../src/api/FieldSelector.js"
import { WatchCacheState } from "../../src/api/internal/watchCacheState.js"
import * as WatchCache from "../../src/api/WatchCache.js"
import * as Keys from "../../src/store/Keys.js"

const key = (name: string) => Keys.object({ group: "", resource: "configmaps", namespace: "shop", name })
const configMap = (name: string, value: string) => JSON.stringify({ apiVersion: "v1", kind: "ConfigMap", metadata: { name, namespace: "shop" }, data: { value } })
const decode = (_key: string, value: string, revision: number): object => {
  const o = JSON.parse(value) as { metadata?: object }
  return { ...o, metadata: { ...o.metadata, resourceVersion: String(revision) } }
}

const makeState = () =>
  new WatchCacheState(
    { decode, fields: FieldSelector.extractor({ apiVersion: "v1", kind: "ConfigMap" }), ringEvents: 100, watcherBuffer: 100 },
    {
      revision: 3,
      items: ["a", "b", "c"].map((name, i) => ({ key: key(name), value: configMap(name, "x".repeat(1000)), createRevision: i + 1, modRevision: i + 1, version: 1 }))
    }
  )

const fromZero = { bookmarks: false, initialEvents: true }
const shop = { namespace: "shop" }
const nameOf = (e: WatchCache.WatchCacheEvent) => (e.object as { metadata: { name: string; resourceVersion: string } }).metadata

/** A full garbage collection (V8's `gc`, exposed for this test). */
const collectGarbage = async () => {
  setFlagsFromString("--expose-gc")
  const gc = runInNewContext("gc") as () => void
  // WeakRef targets read in this turn stay alive until it ends.
  await new Promise((r) => setTimeout(r, 0))
  gc()
  await new Promise((r) => setTimeout(r, 0))
  gc()
}

describe("WatchCache initial state", () => {
  it("gives every watcher from resourceVersion 0 the same event, and the same encoded line, per object", () => {
    const state = makeState()
    const first = state.take(state.register(shop, 0, fromZero))!
    const second = state.take(state.register(shop, 0, fromZero))!
    expect(first.map((e) => nameOf(e).name)).toEqual(["a", "b", "c"])
    for (let i = 0; i < 3; i++) {
      expect(second[i]).toBe(first[i])
      // One serialisation for both: the very same bytes.
      expect(WatchCache.encodeLine(second[i]!)).toBe(WatchCache.encodeLine(first[i]!))
      expect(WatchCache.encodeSse(second[i]!)).toBe(WatchCache.encodeSse(first[i]!))
    }
    const line = new TextDecoder().decode(WatchCache.encodeLine(first[0]!))
    expect(JSON.parse(line)).toMatchObject({ type: "ADDED", object: { metadata: { name: "a", resourceVersion: "1" } } })
    expect(line.endsWith("}\n")).toBe(true)
    // What a watch is sized by before it starts is what it gets.
    expect(state.initialEvents(shop)).toEqual(first)
    expect(state.initialEvents(shop)[1]).toBe(first[1])
  })

  it("serialises a changed object anew, once, for the watchers that start after the change", () => {
    const state = makeState()
    const before = state.take(state.register(shop, 0, fromZero))!
    state.apply([{ type: "MODIFIED", key: key("b"), value: configMap("b", "changed"), revision: 4, prevValue: configMap("b", "x"), createRevision: 2, version: 2 }])
    const after1 = state.take(state.register(shop, 0, fromZero))!
    const after2 = state.take(state.register(shop, 0, fromZero))!
    expect(after1[0]).toBe(before[0])
    expect(after1[1]).not.toBe(before[1])
    expect(nameOf(after1[1]!).resourceVersion).toBe("4")
    expect(after2[1]).toBe(after1[1])
    expect(WatchCache.encodeLine(after2[1]!)).toBe(WatchCache.encodeLine(after1[1]!))
  })

  it("frees an object's shared event and bytes once no watcher holds them", async () => {
    const state = makeState()
    const holder = state.register(shop, 0, fromZero)
    let held: ReadonlyArray<WatchCache.WatchCacheEvent> | undefined = state.take(holder)
    WatchCache.encodeLine(held![0]!)
    const ref = new WeakRef(held![0]!)
    // While a watcher (here: its unsent batch) holds the event, a new watcher shares it.
    await collectGarbage()
    expect(state.take(state.register(shop, 0, fromZero))![0]).toBe(ref.deref())
    // When none does, it is garbage: the cache keeps only a weak reference.
    held = undefined
    await collectGarbage()
    expect(held).toBeUndefined()
    expect(ref.deref()).toBeUndefined()
    // The next watcher gets a fresh event for the same revision.
    const fresh = state.take(state.register(shop, 0, fromZero))!
    expect(nameOf(fresh[0]!)).toMatchObject({ name: "a", resourceVersion: "1" })
  })
})
