// A promise that never settles does not keep the page alive; a timer does until it fires.
new Promise(() => {});
setTimeout(() => console.log('timer fired'), 700);
