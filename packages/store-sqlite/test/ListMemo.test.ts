// The memo of whole-prefix lists: which commits drop which prefixes, and what it keeps at all.
import { describe, expect, it } from "vitest"
import type { Store } from "@koder/fleet-core"
import * as ListMemo from "../src/internal/listMemo.js"

const kv = (key: string): Store.KeyValue => ({ key, value: "v", createRevision: 1, modRevision: 1, version: 1 })

describe("ListMemo", () => {
  it.each([
    { touched: "/registry/quotas/a/q", dropped: ["/registry/", "/registry/quotas/", "/registry/quotas/a/"], kept: ["/registry/quotas/ab/", "/registry/pods/"] },
    { touched: "/registry/quotas/ab/q", dropped: ["/registry/quotas/ab/", "/registry/quotas/"], kept: ["/registry/quotas/a/"] },
    { touched: "/registry/quotas/a/", dropped: ["/registry/quotas/a/"], kept: ["/registry/quotas/ab/"] },
    { touched: "/other", dropped: [], kept: ["/registry/", "/registry/quotas/a/"] }
  ])("a commit of $touched drops the prefixes it falls under", ({ touched, dropped, kept }) => {
    const memo = ListMemo.make()
    for (const p of [...dropped, ...kept]) memo.set(p, [])
    memo.touch(touched)
    for (const p of dropped) expect(memo.get(p), p).toBeUndefined()
    for (const p of kept) expect(memo.get(p), p).toEqual([])
  })

  it("keeps only small lists (items and characters) of prefixes ending in a slash, and at most maxPrefixes of them", () => {
    const memo = ListMemo.make()
    memo.set("/registry/quotas", [])
    memo.set("/big/", Array.from({ length: ListMemo.maxItems + 1 }, (_, i) => kv(`/big/${i}`)))
    memo.set("/large/", [{ ...kv("/large/a"), value: "x".repeat(ListMemo.maxChars + 1) }])
    expect(memo.size()).toBe(0)
    for (let i = 0; i <= ListMemo.maxPrefixes; i++) memo.set(`/p/${i}/`, [kv(`/p/${i}/k`)])
    expect(memo.size()).toBe(ListMemo.maxPrefixes)
    expect(memo.get("/p/0/")).toBeUndefined()
    expect(memo.get(`/p/${ListMemo.maxPrefixes}/`)).toEqual([kv(`/p/${ListMemo.maxPrefixes}/k`)])
  })
})
