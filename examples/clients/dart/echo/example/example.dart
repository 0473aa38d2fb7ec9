import 'dart:io';

import 'package:tollgate_echo/tollgate_echo.dart';

Future<void> main() async {
  final client = EchoClient(Platform.environment['TOLLGATE_API_KEY']!);
  try {
    final response = await client.execute(EchoParams(message: 'hello'));
    print(response.data);
    print('credits left: ${response.credits?.remaining}');
  } finally {
    client.close();
  }
}
