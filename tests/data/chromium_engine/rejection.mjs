console.log('module', typeof import.meta);
await new Promise((r) => setTimeout(r, 10));
Promise.reject(new RangeError('nobody caught me'));
