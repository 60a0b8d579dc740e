/**
 * The Store contract suite (DESIGN §4): one set of behaviours every backend must show. An adapter
 * runs it with its own layer: `StoreContract.suite("sqlite", SqliteStore.layer(...))`. Each test
 * builds the layer afresh, so a layer must give a new, empty store every time it is built.
 *
 * The tests live in one section per concept under internal/storeContract/: single-key writes
 * (crud), txns, lists, watches, compaction, and values kept intact.
 */
import type { Layer } from "effect"
import { describe } from "vitest"
import type { Store } from "../store/Store.js"
import { compaction } from "./internal/storeContract/compaction.js"
import { crudAndCas } from "./internal/storeContract/crud.js"
import { register } from "./internal/storeContract/harness.js"
import { listing } from "./internal/storeContract/list.js"
import { transactions } from "./internal/storeContract/txn.js"
import { values } from "./internal/storeContract/values.js"
import { watching } from "./internal/storeContract/watch.js"

/** Register the contract tests for one backend under `describe("Store contract: <name>")`. */
export const suite = (name: string, layer: Layer.Layer<Store, unknown>, options: { readonly timeout?: number } = {}) => {
  const t = register(layer, options.timeout ?? 30_000)
  describe(`Store contract: ${name}`, () => {
    crudAndCas(t)
    transactions(t)
    listing(t)
    watching(t)
    compaction(t)
    values(t)
  })
}
