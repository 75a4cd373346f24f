console.log('text', 1, 1.5, true, null, undefined, { a: 1, b: 'x' }, [1, 'a'], 10n, Symbol('q'));
console.log('%s is %d years', 'Ada', 36.6, 'extra');
console.info('info line');
console.debug('debug line');
console.warn('warn line');
console.error('error line', new Error('shown').message);
console.log('');
console.log();
