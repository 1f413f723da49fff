// The Express middleware over real HTTP: apps/payments.ts's service.
import { httpSuite } from './http-suite.js';

httpSuite('express');
