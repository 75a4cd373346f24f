import { busy, answer } from './lib.mjs';
busy(20);
console.log('answer', answer, import.meta.url.endsWith('main.mjs'));
