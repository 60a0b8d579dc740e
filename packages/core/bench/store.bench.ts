// The store benchmark against the in-memory store (the baseline the durable stores are read against).
import { Effect } from "effect"
import { Store } from "../src/index.js"
import * as StoreBench from "../src/testing/StoreBench.js"

await Effect.runPromise(StoreBench.run("memory", Store.layerMemory))
