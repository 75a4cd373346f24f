// Loader hooks (module.register): ES modules are transformed as they load.
import { fileURLToPath } from "node:url";
import { makeTransform } from "./node_transform.mjs";

let transform = (s) => s;

export async function initialize(cfg) {
  transform = makeTransform(cfg);
}

export async function load(url, context, nextLoad) {
  const r = await nextLoad(url, context);
  if (r.format !== "module" || !url.startsWith("file:") || r.source == null) return r;
  const src = typeof r.source === "string" ? r.source : Buffer.from(r.source).toString("utf8");
  return { ...r, source: transform(src, fileURLToPath(url)) };
}
